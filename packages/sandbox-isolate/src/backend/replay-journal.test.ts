// The journal on its own, in front of a host that records what reaches it: the order in which a
// second run gets its answers, and the memory bound. (co-tenant-survival.test.ts drives it
// through real worker deaths.)
import {
  resolveExecutionLimits,
  type SandboxErrorCode,
  type StatusLevel,
} from '@coda/sandbox-core';
import { describe, expect, it } from 'vitest';
import type { DataAnswer, JobHost, JobOutcome } from '../isolate/job.ts';
import { ReplayJournal } from './replay-journal.ts';

/** A host whose data answers the test releases by hand, recording every call. */
function manualHost() {
  const seen: string[] = [];
  const pending = new Map<string, (answer: DataAnswer) => void>();
  const host: JobHost = {
    status: (_source: string, _level: StatusLevel, message: string) => {
      seen.push(`status ${message}`);
    },
    data: (paramsJson) => {
      seen.push(`data ${paramsJson}`);
      return new Promise((resolve) => pending.set(paramsJson ?? '', resolve));
    },
  };
  const answer = (paramsJson: string) => pending.get(paramsJson)?.({ ok: true, json: paramsJson });
  return { host, seen, answer };
}

const flush = () => new Promise((resolve) => setTimeout(resolve, 0));

describe('ReplayJournal', () => {
  it('gives a second run the answers in the order they reached the first, calling nothing again', async () => {
    const { host, seen, answer } = manualHost();
    const journal = new ReplayJournal(host, resolveExecutionLimits());
    const order: string[] = [];
    // First run: two concurrent requests; the second is answered first, then a status, then the
    // first; the worker dies before the first run saw anything else.
    void journal.data('"a"', 3, '').then((a) => order.push(`first ${JSON.stringify(a)}`));
    void journal.data('"b"', 3, '').then((a) => order.push(`first ${JSON.stringify(a)}`));
    answer('"b"');
    await flush();
    journal.status('user', 'info', 'after b', undefined);
    answer('"a"');
    await flush();
    expect(seen).toEqual(['data "a"', 'data "b"', 'status after b']);

    journal.replay();
    order.length = 0;
    const replayA = journal.data('"a"', 3, '').then((a) => order.push(`a ${a.ok}`));
    const replayB = journal.data('"b"', 3, '').then((a) => order.push(`b ${a.ok}`));
    await flush();
    // b's answer arrived first, and the status came before a's: a waits for it.
    expect(order).toEqual(['b true']);
    journal.status('user', 'info', 'after b', undefined);
    await Promise.all([replayA, replayB]);
    expect(order).toEqual(['b true', 'a true']);
    // Past the journal's end: live.
    journal.status('user', 'info', 'new', undefined);
    expect(seen).toEqual(['data "a"', 'data "b"', 'status after b', 'status new']);
  });

  it('waits for an answer still with its handler when the worker died, without asking again', async () => {
    const { host, seen, answer } = manualHost();
    const journal = new ReplayJournal(host, resolveExecutionLimits());
    void journal.data('"slow"', 6, '');
    journal.replay();
    let got: DataAnswer | undefined;
    const replayed = journal.data('"slow"', 6, '').then((a) => {
      got = a;
    });
    await flush();
    expect(got).toBeUndefined();
    answer('"slow"');
    await replayed;
    expect(got).toEqual({ ok: true, json: '"slow"' });
    expect(seen).toEqual(['data "slow"']);
  });

  it('keeps a long request as its fingerprint, and still tells an equal one from another', async () => {
    const long = JSON.stringify('x'.repeat(10_000));
    const other = JSON.stringify(`${'x'.repeat(9_999)}y`);
    const journalOf = async () => {
      const { host, seen, answer } = manualHost();
      const journal = new ReplayJournal(host, resolveExecutionLimits());
      const first = journal.data(long, long.length, '');
      answer(long);
      await first;
      journal.replay();
      return { journal, seen };
    };
    const same = await journalOf();
    expect(await same.journal.data(long, long.length, '')).toEqual({ ok: true, json: long });
    expect(same.seen).toEqual([`data ${long}`]);
    const differs = await journalOf();
    const refused = await differs.journal.data(other, other.length, '');
    expect(refused).toMatchObject({ ok: false, fatal: { details: { replayDiverged: true } } });
    // The diverging request reached no handler.
    expect(differs.seen).toEqual([`data ${long}`]);
  });

  it('past the bounds of the execution limits it keeps nothing and cannot replay', async () => {
    const limits = resolveExecutionLimits({
      maxStatusEvents: 2,
      maxConsoleCalls: 1,
      maxDataRequests: 1,
      maxDataBytes: 1_000,
    });
    // maxStatusEvents + maxConsoleCalls + 2 × (maxDataRequests + 1) = 7 entries.
    const within = new ReplayJournal(manualHost().host, limits);
    for (let i = 0; i < 7; i++) within.status('user', 'info', 'x', undefined);
    expect(within.replayable).toBe(true);
    const over = new ReplayJournal(manualHost().host, limits);
    for (let i = 0; i < 8; i++) over.status('user', 'info', 'x', undefined);
    expect(over.replayable).toBe(false);
    // Answers are kept whole: maxDataBytes of them, plus 1 536 units per entry at most.
    const answered = async (units: number) => {
      const { host, answer } = manualHost();
      const journal = new ReplayJournal(host, limits);
      const json = JSON.stringify('a'.repeat(units - 2));
      const asked = journal.data(json, json.length, '');
      answer(json);
      await asked;
      return journal.replayable;
    };
    expect(await answered(1_000)).toBe(true);
    // Each entry may also be a refusal (a handler's error, cut at 1 000 units): 1 024 more each.
    expect(await answered(1_000 + 1_024 * 7)).toBe(true);
    expect(await answered(1_000 + (512 + 1_024) * 7 + 1)).toBe(false);
    // Within its limits an execution stays within them: every request refused with the longest
    // error a handler can give (found by an attack, stop 39: 4 such refusals passed the bound).
    const refusals = new ReplayJournal(
      { status: () => {}, data: async () => ({ ok: false, message: `${'e'.repeat(1_000)}…` }) },
      limits,
    );
    for (let i = 0; i < limits.maxDataRequests + 1; i++) await refusals.data('{}', 2, '');
    for (let i = 0; i < 3; i++) refusals.status('user', 'info', 'x', undefined);
    expect(refusals.replayable).toBe(true);
  });

  it('a late answer past the bounds during the second run keeps the journal: nothing goes live', async () => {
    const limits = resolveExecutionLimits({
      maxStatusEvents: 1,
      maxConsoleCalls: 0,
      maxDataRequests: 1,
      maxDataBytes: 100,
    });
    const seen: string[] = [];
    let late: (answer: DataAnswer) => void = () => {};
    const journal = new ReplayJournal(
      {
        status: (_source, _level, message) => seen.push(`status ${message}`),
        data: (paramsJson) => {
          seen.push(`data ${paramsJson}`);
          return new Promise((resolve) => {
            late = resolve;
          });
        },
      },
      limits,
    );
    // First run: a request still with its handler at the death, then a status.
    void journal.data('"slow"', 6, '');
    journal.status('user', 'info', 'charging', undefined);
    journal.replay();
    const replayed = journal.data('"slow"', 6, '');
    // The handler answers now, far past the bound (5 entries, 100 + 1 536 × 5 units).
    const huge = JSON.stringify('a'.repeat(50_000));
    late({ ok: true, json: huge });
    await flush();
    // The recorded status is matched, not shown again; then the answer comes from the journal.
    journal.status('user', 'info', 'charging', undefined);
    const got = await Promise.race([replayed, flush().then(() => 'never answered')]);
    expect(got).toEqual({ ok: true, json: huge });
    expect(seen).toEqual(['data "slow"', 'status charging']);
  });

  it('a second run that ends before reproducing the first run diverges; one that got there, or was stopped, does not', async () => {
    const stats = { wallMs: 1, cpuMs: 1, heapUsedBytes: 0, statusDropped: 0 };
    const result: JobOutcome = { kind: 'result', json: '1', stats };
    const own = (code: SandboxErrorCode): JobOutcome => ({
      kind: 'error',
      error: { name: 'E', code, message: code },
      stats,
    });
    const journalOf = async () => {
      const { host, answer } = manualHost();
      const journal = new ReplayJournal(host, resolveExecutionLimits());
      journal.status('user', 'info', 'charging', undefined);
      const paid = journal.data('"pay"', 5, '', 'pay');
      answer('"pay"');
      await paid;
      journal.replay();
      return journal;
    };
    // Ended after the status only: the tool call the first run made is missing.
    for (const outcome of [result, own('RUNTIME'), own('VALIDATION')]) {
      const journal = await journalOf();
      journal.status('user', 'info', 'charging', undefined);
      const settled = journal.settle(outcome);
      expect(settled).toMatchObject({
        kind: 'error',
        error: {
          code: 'CRASH',
          details: { collateral: true, replayDiverged: true },
          message:
            'The execution was lost with a worker process another execution killed, and ran again; the second run ended without making a tool call the first run had made, so it was ended rather than show the caller or a handler something twice',
        },
        stats,
      });
    }
    // Stopped by the host (time, cancellation, a limit, a death): its own code stays.
    for (const code of ['TIMEOUT', 'CANCELLED', 'LIMIT_EXCEEDED', 'OOM', 'CRASH'] as const) {
      const journal = await journalOf();
      expect(journal.settle(own(code))).toEqual(own(code));
    }
    // Reproduced all of it: the result stands.
    const journal = await journalOf();
    journal.status('user', 'info', 'charging', undefined);
    expect(await journal.data('"pay"', 5, '', 'pay')).toEqual({ ok: true, json: '"pay"' });
    expect(journal.settle(result)).toEqual(result);
  });

  it('mutes a second run whose status diverged: what it does next decides how it ends', async () => {
    const stats = { wallMs: 1, cpuMs: 1, heapUsedBytes: 0, statusDropped: 0 };
    const statusDiverged = {
      name: 'SandboxCrashError',
      code: 'CRASH',
      message:
        "The execution was lost with a worker process another execution killed, and ran again; the second run made a status event that differs from the first run's, so it was ended rather than show the caller or a handler something twice",
      details: { collateral: true, replayDiverged: true },
    };
    const diverged = async () => {
      const { host, seen, answer } = manualHost();
      const journal = new ReplayJournal(host, resolveExecutionLimits());
      journal.status('user', 'info', 'at 1', undefined);
      const paid = journal.data('"pay"', 5, '', 'pay');
      answer('"pay"');
      await paid;
      journal.replay();
      journal.status('user', 'info', 'at 2', undefined);
      return { journal, seen };
    };
    // Its status events reach nobody, and its next request no handler: it ends the run.
    const asking = await diverged();
    asking.journal.status('user', 'info', 'later', undefined);
    expect(await asking.journal.data('"pay"', 5, '', 'pay')).toEqual({
      ok: false,
      message: statusDiverged.message,
      fatal: statusDiverged,
    });
    expect(asking.seen).toEqual(['status at 1', 'data "pay"']);
    // An outcome its code produced is the journal's error; one the host imposed stays.
    for (const outcome of [
      { kind: 'result', json: '1', stats },
      { kind: 'error', error: { name: 'E', code: 'RUNTIME', message: 'x' }, stats },
    ] as const) {
      const { journal } = await diverged();
      expect(journal.settle(outcome)).toEqual({ kind: 'error', error: statusDiverged, stats });
    }
    for (const code of ['OOM', 'TIMEOUT', 'CRASH', 'CANCELLED', 'LIMIT_EXCEEDED'] as const) {
      const { journal } = await diverged();
      const own: JobOutcome = { kind: 'error', error: { name: 'E', code, message: code }, stats };
      expect(journal.settle(own)).toEqual(own);
    }
  });

  it('ends a second run idle behind a request it never makes, only when nothing is on its way', async () => {
    const waitedMessage =
      'The execution was lost with a worker process another execution killed, and ran again; the second run waited for answers without making a tool call the first run had made, so it was ended rather than show the caller or a handler something twice';
    // First run: slow and pay concurrently, slow answered after both were made.
    const journalOf = async () => {
      const { host, seen, answer } = manualHost();
      const journal = new ReplayJournal(host, resolveExecutionLimits());
      const slow = journal.data('"slow"', 6, '', 'slow');
      void journal.data('"pay"', 5, '', 'pay');
      answer('"slow"');
      await slow;
      journal.replay();
      return { journal, seen };
    };
    // The second run makes slow only and waits: its answer is held behind pay.
    const { journal, seen } = await journalOf();
    let got: DataAnswer | undefined;
    const replayed = journal.data('"slow"', 6, '', 'slow').then((a) => {
      got = a;
    });
    // Stale reports change nothing: a request the journal has not seen yet, an answer on its way.
    journal.idle(2, 0);
    journal.idle(1, 1);
    await flush();
    expect(got).toBeUndefined();
    journal.idle(1, 0);
    await replayed;
    expect(got).toEqual({
      ok: false,
      message: waitedMessage,
      fatal: {
        name: 'SandboxCrashError',
        code: 'CRASH',
        message: waitedMessage,
        details: { collateral: true, replayDiverged: true },
      },
    });
    expect(seen).toEqual(['data "slow"', 'data "pay"']);

    // Idle having made all the first run made, waiting for an answer its handler still owes: it
    // is not ended, and gets that answer when it comes, without asking again.
    const { host, seen: seenAfter, answer } = manualHost();
    const whole = new ReplayJournal(host, resolveExecutionLimits());
    const first = whole.data('"slow"', 6, '', 'slow');
    void whole.data('"pay"', 5, '', 'pay');
    whole.idle(2, 0); // the first run: never ends anything
    answer('"slow"');
    await first;
    whole.replay();
    const slowAgain = whole.data('"slow"', 6, '', 'slow');
    const payAgain = whole.data('"pay"', 5, '', 'pay');
    expect(await slowAgain).toEqual({ ok: true, json: '"slow"' });
    whole.idle(2, 1);
    answer('"pay"');
    expect(await payAgain).toEqual({ ok: true, json: '"pay"' });
    expect(seenAfter).toEqual(['data "slow"', 'data "pay"']);
  });
});
