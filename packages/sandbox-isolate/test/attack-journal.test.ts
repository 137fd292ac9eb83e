// Attack on the replay journal (issue 23, class 8): an execution lost with a worker another one
// killed runs again alone, its journal answering what the host already answered. Everything the
// caller and the handlers can observe is counted here and must be exact: events, handler starts
// (a side-effecting tool must never run twice), stats, spans. Also what the journal cannot
// replay: a second run that does less than the first (found here: it returned a result although
// the caller had seen a status and a tool had run that the final run never made), or something
// else (time in a status), ends replayDiverged; a cancellation or a timeout during the second run
// starts nothing more. One engine, one worker, short busy loops: the file takes a few seconds.
import type { Logger, SandboxEvent, TerminalEvent } from '@coda/sandbox-core';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SandboxEngine } from '../src/index.ts';
import { collect, expectError, expectResult } from './helpers.ts';

/**
 * Kills its worker once armed: it waits in the worker on `tools.arm()` (its isolate built, using
 * no CPU), and when the test answers, V8 exhausts its 8 MiB heap, which isolated-vm cannot recover
 * from. So the death comes within a few hundred ms of the test's word, whatever the load.
 */
const killer = {
  code: 'await tools.arm(); const m = new Map(); let i = 0; while (true) m.set(i++, { i });',
  limits: { memoryMb: 8 },
};
const busy = (ms: number) => `{ const end = Date.now() + ${ms}; while (Date.now() < end) {} }`;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function until(done: () => boolean, withinMs = 15_000): Promise<void> {
  const deadline = Date.now() + withinMs;
  while (!done()) {
    if (Date.now() > deadline) throw new Error('condition not reached');
    await sleep(5);
  }
}

/** Each handler start, as `name input`, in order: the side effects the host made. */
const starts: string[] = [];
/** The killer's `arm` calls waiting for the test's word. */
const armed: (() => void)[] = [];
/** Handlers of the `slow` tool waiting for the test, with the signal each got. */
const slow: {
  release: (value: unknown) => void;
  reject: (message: string) => void;
  signal: AbortSignal;
}[] = [];
/** Worker deaths (executions held) and executions run again, from the engine's log. */
const deaths: number[] = [];
const retried: string[] = [];
const logger: Logger = {
  debug: () => {},
  info: (object: unknown, message?: string) => {
    if (message?.includes('running it again alone'))
      retried.push((object as { jobId: string }).jobId);
  },
  warn: (object: unknown, message?: string) => {
    if (message === 'sandbox worker process ended') deaths.push((object as { jobs: number }).jobs);
  },
  error: () => {},
};
const spans = new InMemorySpanExporter();
const tracerProvider = new BasicTracerProvider({
  spanProcessors: [new SimpleSpanProcessor(spans)],
});

/** The bound of a wait to run alone (docs/isolate.md, "The queue's own bound"). */
const maxQueueWaitMs = 10_000;
const engine = new SandboxEngine({
  workers: 1,
  poolSize: 0,
  maxQueueWaitMs,
  logger,
  telemetry: { tracerProvider },
  dataHandler: (params) => {
    starts.push(`data ${JSON.stringify(params)}`);
    return { answered: params };
  },
  tools: {
    pay: {
      handler: (input) => {
        starts.push(`pay ${JSON.stringify(input)}`);
        return 'paid';
      },
    },
    arm: { handler: () => new Promise<null>((resolve) => armed.push(() => resolve(null))) },
    /** Refuses with an 800-character error: refusals count toward the journal's bound. */
    fail: {
      handler: (input) => {
        starts.push(`fail ${JSON.stringify(input)}`);
        throw new Error('e'.repeat(800));
      },
    },
    slow: {
      handler: (input, { signal }) => {
        starts.push(`slow ${JSON.stringify(input)}`);
        return new Promise((release, reject) =>
          slow.push({ release, signal, reject: (message) => reject(new Error(message)) }),
        );
      },
    },
  },
});
beforeAll(() => engine.ready(), 60_000);
afterAll(() => engine.dispose());

/** Events in the form the tables compare: status messages, then the terminal type or code. */
function shape(events: SandboxEvent[]): string[] {
  return events.map((event) =>
    event.type === 'status'
      ? `${event.source}: ${event.message}`
      : event.type === 'error'
        ? event.code
        : event.type,
  );
}

/** How {@link lostWith} runs the code and when it kills the worker under it. */
interface LostWithOptions {
  /** The code's limits (default: a 10 s time limit). */
  limits?: Record<string, number>;
  /** The kill waits until the clock passed this (Date.now()). */
  killAfter?: number;
  /** Runs just before the kill. */
  beforeKill?: () => Promise<void>;
}

/**
 * Parks a killer in the worker, submits `code`, waits until the host has seen `calls` handler
 * starts of it (its first run reached the host) and the clock passed `killAfter`, then lets the
 * killer kill the worker under both. Returns its events and the killer's terminal event; the
 * worker's first death held exactly the two of them.
 */
async function lostWith(code: string, calls: number, options: LostWithOptions = {}) {
  const { limits = { timeoutMs: 10_000 }, killAfter = 0, beforeKill } = options;
  const deathsBefore = deaths.length;
  armed.length = 0;
  const killed = engine.run(killer);
  await until(() => armed.length === 1);
  const before = starts.length;
  const submitted = performance.now();
  const handle = engine.submit({ code, limits });
  const events = collect(handle);
  await until(() => starts.length - before === calls);
  await sleep(50);
  await until(() => Date.now() > killAfter);
  await beforeKill?.();
  const killedAt = performance.now();
  armed[0]!();
  await until(() => deaths.length > deathsBefore);
  expect(deaths[deathsBefore]).toBe(2);
  // The killer went first to the queue of those run again alone: once it died alone, the
  // co-tenant's second run starts on the next worker.
  const secondRunStarts = () =>
    until(() => deaths.length - deathsBefore === 2).then(() => sleep(700));
  return {
    handle,
    events,
    killed,
    submitted,
    killedAt,
    secondRunStarts,
    newStarts: () => starts.slice(before),
  };
}

const divergedMessage = (how: string) =>
  `The execution was lost with a worker process another execution killed, and ran again; the second run ${how}, so it was ended rather than show the caller or a handler something twice`;

describe('the replay journal under attack (process, one worker)', () => {
  it('everything the caller and handlers saw happens once: events, handler starts, stats, spans', async () => {
    spans.reset();
    const retriedBefore = retried.length;
    const run = await lostWith(
      `console.log('c1'); reportStatus('s1', { k: 1 });
       const a = await dataProxy.request({ q: 1 }); const b = await tools.pay({ n: 2 });
       console.log('c2'); ${busy(600)} return [a, b]`,
      2,
    );
    const events = await run.events;
    expect(shape(events)).toEqual(['console: c1', 'reportStatus: s1', 'console: c2', 'result']);
    const result = expectResult(events.at(-1) as TerminalEvent);
    expect(result.payload).toEqual([{ answered: { q: 1 } }, 'paid']);
    expect(result.stats).toMatchObject({
      dataRequests: 2,
      dataBytes: 7 + 7 + 20 + 6,
      statusEvents: 3,
      statusDropped: 0,
      statusBytes: 2 + 2 + 2 + 7,
      resultBytes: 29,
    });
    expect(run.newStarts()).toEqual(['data {"q":1}', 'pay {"n":2}']);
    expectError(await run.killed, 'OOM');
    expect(retried.length - retriedBefore).toBe(2);
    // One execution span per execution (the killer's is the other), one call span per handler
    // start: the calls answered from the journal made none (the killer's arm neither).
    const finished = () => spans.getFinishedSpans();
    await until(
      () => finished().filter((span) => span.name === 'coda.sandbox.execution').length === 2,
    );
    const count = (name: string, tool?: string) =>
      finished().filter(
        (span) =>
          span.name === name &&
          (tool === undefined || span.attributes['gen_ai.tool.name'] === tool),
      ).length;
    expect(count('coda.sandbox.execution')).toBe(2);
    expect(count('coda.sandbox.data_request')).toBe(1);
    expect(count('coda.sandbox.tool_call', 'pay')).toBe(1);
    expect(count('coda.sandbox.tool_call', 'arm')).toBe(1);
    expect(count('coda.sandbox.tool_call')).toBe(2);
  }, 30_000);

  it('a second run that ends before doing what the first run did ends replayDiverged', async () => {
    // The first run (before `switchAt`) reports and pays; the second (after it) skips both and
    // returns. Before the fix the caller got 'charging', then the result "done": a payment the
    // final run never made.
    const switchAt = Date.now() + 700;
    const run = await lostWith(
      `if (Date.now() < ${switchAt}) { reportStatus('charging'); await tools.pay({ n: 1 }); }
       ${busy(1_500)} return 'done'`,
      1,
      { killAfter: switchAt },
    );
    const events = await run.events;
    expect(shape(events)).toEqual(['reportStatus: charging', 'CRASH']);
    const error = expectError(events.at(-1) as TerminalEvent, 'CRASH');
    expect(error.details).toEqual({ collateral: true, replayDiverged: true });
    expect(error.message).toBe(
      divergedMessage('ended without making a status event the first run had made'),
    );
    expect(run.newStarts()).toEqual(['pay {"n":1}']);
    expectError(await run.killed, 'OOM');
  }, 30_000);

  it('a status built from the clock diverges on its second run: no status twice', async () => {
    const before = starts.length;
    const run = await lostWith(
      `reportStatus('at ' + Date.now()); await tools.pay({ n: 3 }); ${busy(600)} return 1`,
      1,
    );
    const events = await run.events;
    expect(shape(events).map((each) => each.replace(/\d+$/, 'T'))).toEqual([
      'reportStatus: at T',
      'CRASH',
    ]);
    expect(expectError(events.at(-1) as TerminalEvent, 'CRASH').message).toBe(
      divergedMessage("made a status event that differs from the first run's"),
    );
    expect(starts.slice(before)).toEqual(['pay {"n":3}']);
    expectError(await run.killed, 'OOM');
  }, 30_000);

  it('cancelled during its second run: one CANCELLED, no handler starts after it', async () => {
    const retriedBefore = retried.length;
    const run = await lostWith(
      `await tools.pay({ n: 4 }); ${busy(1_500)} await tools.pay({ n: 5 }); return 1`,
      1,
    );
    // The replacement worker is up and the second run is in its busy loop.
    await run.secondRunStarts();
    expect(retried.length - retriedBefore).toBe(2);
    run.handle.cancel('caller gave up');
    const events = await run.events;
    expect(shape(events)).toEqual(['CANCELLED']);
    // Past where the second run would have paid again.
    await sleep(1_500);
    expect(run.newStarts()).toEqual(['pay {"n":4}']);
    expectError(await run.killed, 'OOM');
  }, 30_000);

  it('a handler still running when its worker died is awaited, not called again; cancelled, its signal aborts', async () => {
    const retriedBefore = retried.length;
    slow.length = 0;
    const answered = await lostWith(`return await tools.slow({ n: 6 })`, 1);
    await answered.secondRunStarts();
    expect(retried.length - retriedBefore).toBe(2);
    slow[0]!.release('late answer');
    const events = await answered.events;
    expect(shape(events)).toEqual(['result']);
    expect(expectResult(events[0] as TerminalEvent).payload).toBe('late answer');
    expect(answered.newStarts()).toEqual(['slow {"n":6}']);
    expectError(await answered.killed, 'OOM');

    slow.length = 0;
    const cancelled = await lostWith(`return await tools.slow({ n: 7 })`, 1);
    await cancelled.secondRunStarts();
    expect(retried.length - retriedBefore).toBe(4);
    expect(slow[0]!.signal.aborted).toBe(false);
    cancelled.handle.cancel('caller gave up');
    expect(shape(await cancelled.events)).toEqual(['CANCELLED']);
    expect(slow[0]!.signal.aborted).toBe(true);
    slow[0]!.release('too late');
    await sleep(100);
    expect(cancelled.newStarts()).toEqual(['slow {"n":7}']);
    expectError(await cancelled.killed, 'OOM');
  }, 30_000);

  it('its second run gets the full timeoutMs; the whole stays within the documented bound', async () => {
    const timeoutMs = 800;
    const run = await lostWith(`await tools.pay({ n: 8 }); for (;;) {}`, 1, {
      limits: { timeoutMs },
    });
    const events = await run.events;
    const tookMs = performance.now() - run.submitted;
    expect(shape(events)).toEqual(['TIMEOUT']);
    const error = expectError(events[0] as TerminalEvent, 'TIMEOUT');
    expect(error.details).toEqual({ timeoutMs });
    expect(error.message).toBe(`Execution timed out after ${timeoutMs} ms`);
    // The second run's own time (its stats) is the full limit, not what the first run left.
    expect(error.stats?.wallMs).toBeGreaterThanOrEqual(timeoutMs);
    expect(error.stats?.wallMs).toBeLessThan(timeoutMs + 1_000);
    // The whole: the first run (cut short by the death), the wait to run alone (behind the
    // killer's own retry, bounded by maxQueueWaitMs) and the second run.
    expect(tookMs).toBeGreaterThan(timeoutMs);
    expect(tookMs).toBeLessThan(timeoutMs + maxQueueWaitMs + timeoutMs + 1_000);
    expect(run.newStarts()).toEqual(['pay {"n":8}']);
    expectError(await run.killed, 'OOM');
  }, 30_000);

  it('the cause, run again alone, kills only itself: a job submitted meanwhile is not on its worker', async () => {
    const deathsBefore = deaths.length;
    const retriedBefore = retried.length;
    const run = await lostWith(`await tools.pay({ n: 9 }); ${busy(600)} return 9`, 1);
    // Submitted while the two wait to run alone: it waits, and never shares the killer's worker.
    const meanwhile = engine.run({ code: `${busy(200)} return 'meanwhile'` });
    expect(expectResult(await meanwhile).payload).toBe('meanwhile');
    expect(expectResult((await run.events).at(-1) as TerminalEvent).payload).toBe(9);
    const own = expectError(await run.killed, 'OOM');
    expect(own.details).toEqual({ memoryMb: 8 });
    expect(own.message).toContain('exhausted memory');
    // The shared death (2 jobs), then the killer alone (1): no third death, nobody else lost.
    await until(() => deaths.length - deathsBefore === 2);
    expect(deaths.slice(deathsBefore)).toEqual([2, 1]);
    expect(retried.length - retriedBefore).toBe(2);
    expect(run.newStarts()).toEqual(['pay {"n":9}']);
  }, 30_000);
});

// The muted second run (docs/isolate.md, "When the second run diverges"): a second run that
// diverged from its journal is muted, not stopped, and what it does next decides how it ends.
// Found by an attack on the change that muted it (stop 39): a second run waiting for a recorded
// answer when it diverged waited forever (TIMEOUT at its full limit), and the muted run's own
// figures (status dropped by its caps, its heap) reached the caller's stats; the rows after
// those are what held.
const withoutClock = (events: SandboxEvent[]) =>
  shape(events).map((each) => each.replace(/\d{6,}/, 'T'));

describe('muted second run: found by its attack (process, one worker)', () => {
  it('a recorded answer placed after a status the second run changed: replayDiverged at once, not TIMEOUT', async () => {
    // First run: asks `slow`, reports the clock, gets the answer (released before the death),
    // then busy. Journal: [request slow, status T1, answer]. Second run: request matched (waits
    // for the answer entry), status T2 diverges: muted; the answer is never delivered.
    slow.length = 0;
    const timeoutMs = 4_000;
    const run = await lostWith(
      `const p = tools.slow({ n: 1 }); reportStatus('at ' + Date.now()); const r = await p; ${busy(1_500)} return r`,
      1,
      {
        limits: { timeoutMs },
        beforeKill: async () => {
          slow[0]!.release('answer');
          await sleep(100);
        },
      },
    );
    const events = await run.events;
    const tookMs = performance.now() - run.killedAt;
    expect(withoutClock(events)).toEqual(['reportStatus: at T', 'CRASH']);
    const error = expectError(events.at(-1) as TerminalEvent, 'CRASH');
    expect(error.details).toEqual({ collateral: true, replayDiverged: true });
    expect(error.message).toBe(
      divergedMessage("made a status event that differs from the first run's"),
    );
    // It ends once it diverged and waits on nothing the host will give it, not at its time limit.
    expect(tookMs).toBeLessThan(timeoutMs);
    expect(run.newStarts()).toEqual(['slow {"n":1}']);
    expectError(await run.killed, 'OOM');
  }, 30_000);

  it('a handler in flight at the death, its answer awaited by a second run that then diverged: replayDiverged, not TIMEOUT', async () => {
    slow.length = 0;
    const timeoutMs = 4_000;
    const run = await lostWith(
      `const p = tools.slow({ n: 2 }); reportStatus('at ' + Date.now()); return await p`,
      1,
      { limits: { timeoutMs } },
    );
    await run.secondRunStarts();
    slow[0]!.release('late answer');
    const releasedAt = performance.now();
    const events = await run.events;
    expect(withoutClock(events)).toEqual(['reportStatus: at T', 'CRASH']);
    const error = expectError(events.at(-1) as TerminalEvent, 'CRASH');
    expect(error.details).toEqual({ collateral: true, replayDiverged: true });
    expect(error.message).toBe(
      divergedMessage("made a status event that differs from the first run's"),
    );
    expect(performance.now() - releasedAt).toBeLessThan(timeoutMs - 1_000);
    expect(run.newStarts()).toEqual(['slow {"n":2}']);
    expectError(await run.killed, 'OOM');
  }, 30_000);

  it("the muted run's status events dropped by the isolate's cap do not reach the caller's stats", async () => {
    // First run: pays, reports the clock, busy (killed there). Second run: the status diverges,
    // then the muted run reports 20 more and returns. The caller was shown one status and no drop.
    const run = await lostWith(
      `await tools.pay({ n: 3 }); reportStatus('at ' + Date.now()); ${busy(800)}
       for (let i = 0; i < 20; i++) reportStatus('muted ' + i); return 1`,
      1,
      { limits: { timeoutMs: 10_000, maxStatusEvents: 5 } },
    );
    const events = await run.events;
    expect(withoutClock(events)).toEqual(['reportStatus: at T', 'CRASH']);
    const error = expectError(events.at(-1) as TerminalEvent, 'CRASH');
    expect(error.details).toEqual({ collateral: true, replayDiverged: true });
    // Nothing the caller saw was dropped, and the muted run's statuses are not counted either
    // way (with 3 of them instead of 20, under the cap, it was 0 before the fix too).
    expect(error.stats).toMatchObject({ statusEvents: 1, statusDropped: 0 });
    expect(run.newStarts()).toEqual(['pay {"n":3}']);
    expectError(await run.killed, 'OOM');
  }, 30_000);
  it("the muted run's console calls past maxConsoleCalls, and its heap, do not reach the caller's stats", async () => {
    const run = await lostWith(
      `await tools.pay({ n: 4 }); console.log('at ' + Date.now()); ${busy(800)}
       for (let i = 0; i < 20; i++) console.log('muted ' + i);
       globalThis.kept = new Array(4e6).fill(1.5); return 1`,
      1,
      { limits: { timeoutMs: 10_000, maxConsoleCalls: 5, memoryMb: 128 } },
    );
    const events = await run.events;
    expect(withoutClock(events)).toEqual(['console: at T', 'CRASH']);
    const error = expectError(events.at(-1) as TerminalEvent, 'CRASH');
    expect(error.details).toEqual({ collateral: true, replayDiverged: true });
    // As when the muted run asks for something instead (its fatal answer ends it with no figures
    // of its own), and as the run stopped at its divergence reported before it was muted.
    expect(error.stats).toMatchObject({ statusEvents: 1, statusDropped: 0, heapUsedBytes: 0 });
    expect(run.newStarts()).toEqual(['pay {"n":4}']);
    expectError(await run.killed, 'OOM');
  }, 30_000);
});

describe('muted second run: what held (process, one worker)', () => {
  it('cancelled while muted: one CANCELLED after the first run status, no handler starts after it', async () => {
    const run = await lostWith(
      `await tools.pay({ n: 10 }); reportStatus('at ' + Date.now()); ${busy(3_000)} await tools.pay({ n: 11 }); return 1`,
      1,
    );
    await run.secondRunStarts();
    run.handle.cancel('caller gave up');
    const events = await run.events;
    expect(withoutClock(events)).toEqual(['reportStatus: at T', 'CANCELLED']);
    await sleep(2_500);
    expect(run.newStarts()).toEqual(['pay {"n":10}']);
    expectError(await run.killed, 'OOM');
  }, 30_000);

  it('a muted run returning a value that is not JSON ends replayDiverged', async () => {
    const run = await lostWith(
      `await tools.pay({ n: 12 }); reportStatus('at ' + Date.now()); ${busy(800)} console.log('after'); return () => 1`,
      1,
    );
    const events = await run.events;
    expect(withoutClock(events)).toEqual(['reportStatus: at T', 'CRASH']);
    expect(expectError(events.at(-1) as TerminalEvent, 'CRASH').details).toEqual({
      collateral: true,
      replayDiverged: true,
    });
    expect(run.newStarts()).toEqual(['pay {"n":12}']);
    expectError(await run.killed, 'OOM');
  }, 30_000);

  it('a timer that calls a tool after the divergence starts no handler and ends replayDiverged', async () => {
    const run = await lostWith(
      `await tools.pay({ n: 13 }); console.log('at ' + Date.now());
       setTimeout(() => { console.log('timer'); tools.pay({ n: 14 }).catch(() => {}); }, 300);
       ${busy(800)} await new Promise((r) => setTimeout(r, 1_500)); return 1`,
      1,
    );
    const events = await run.events;
    expect(withoutClock(events)).toEqual(['console: at T', 'CRASH']);
    expect(expectError(events.at(-1) as TerminalEvent, 'CRASH').message).toBe(
      divergedMessage("made a status event that differs from the first run's"),
    );
    expect(run.newStarts()).toEqual(['pay {"n":13}']);
    expectError(await run.killed, 'OOM');
  }, 30_000);

  it('a fatal answer reaching a muted run in a synchronous loop on its isolate thread ends it at once', async () => {
    const timeoutMs = 5_000;
    const run = await lostWith(
      `await tools.pay({ n: 15 }); tools.pay({ n: Date.now() }).catch(() => {}); while (true) {}`,
      2,
      { limits: { timeoutMs } },
    );
    const events = await run.events;
    expect(withoutClock(events)).toEqual(['CRASH']);
    expect(expectError(events[0] as TerminalEvent, 'CRASH').message).toBe(
      divergedMessage("made a tool call that differs from the first run's"),
    );
    expect(performance.now() - run.killedAt).toBeLessThan(timeoutMs);
    expect(run.newStarts().length).toBe(2);
    expectError(await run.killed, 'OOM');
  }, 30_000);

  it('diverging on the last journal entry mutes what would have been live after it', async () => {
    const run = await lostWith(
      `await tools.pay({ n: 16 }); ${busy(300)} reportStatus('at ' + Date.now()); ${busy(800)}
       reportStatus('after'); console.log('after'); return 1`,
      1,
      { beforeKill: () => sleep(400).then(() => {}) },
    );
    const events = await run.events;
    expect(withoutClock(events)).toEqual(['reportStatus: at T', 'CRASH']);
    expect(run.newStarts()).toEqual(['pay {"n":16}']);
    expectError(await run.killed, 'OOM');
  }, 30_000);
});

// A second attack on the journal (stop 39, a helper). Its first two rows failed before: the
// journal's bound counted no refusals, so four 800-character handler errors within every limit
// filled it; a late answer from the first run then dropped it during the second run, which went
// live from where it was (a tool called twice, a status shown twice, then LIMIT_EXCEEDED).
/** Limits under which four 800-character refusals passed the journal's old bound. */
const refusalLimits = {
  timeoutMs: 8_000,
  maxConsoleCalls: 0,
  maxDataRequests: 8,
  maxDataBytes: 100,
};

describe('the replay journal under a second attack (process, one worker)', () => {
  it('a late first-run answer while the second run replays: each handler runs once', async () => {
    slow.length = 0;
    const limits = { ...refusalLimits, maxStatusEvents: 0 };
    const run = await lostWith(
      `const p = tools.slow({ n: 1 }); ${busy(2_500)}
       for (let n = 2; n <= 5; n++) { try { await tools.fail({ n }); } catch {} }
       const paid = await tools.pay({ n: 6 }); ${busy(2_000)}
       let late; try { late = await p; } catch { late = 'rejected'; }
       return [late, paid];`,
      6,
      { limits },
    );
    // The second run is in its first busy loop, having matched slow(1): the handler answers now.
    await run.secondRunStarts();
    slow[0]!.reject('r'.repeat(800));
    const events = await run.events;
    expect(run.newStarts()).toEqual([
      'slow {"n":1}',
      'fail {"n":2}',
      'fail {"n":3}',
      'fail {"n":4}',
      'fail {"n":5}',
      'pay {"n":6}',
    ]);
    expect(shape(events)).toEqual(['result']);
    expect(expectResult(events[0] as TerminalEvent).payload).toEqual(['rejected', 'paid']);
    expectError(await run.killed, 'OOM');
  }, 40_000);

  it('a late first-run answer while it waits to run alone: no status twice, no handler twice', async () => {
    slow.length = 0;
    const limits = { ...refusalLimits, maxStatusEvents: 2 };
    const run = await lostWith(
      `const p = tools.slow({ n: 1 }); reportStatus('charging'); const paid = await tools.pay({ n: 2 });
       for (let n = 3; n <= 6; n++) { try { await tools.fail({ n }); } catch {} }
       ${busy(2_000)}
       let late; try { late = await p; } catch { late = 'rejected'; }
       return [late, paid];`,
      6,
      { limits },
    );
    // The worker died under both; the execution waits to run again alone behind the killer.
    slow[0]!.reject('r'.repeat(800));
    const events = await run.events;
    expect(run.newStarts()).toEqual([
      'slow {"n":1}',
      'pay {"n":2}',
      'fail {"n":3}',
      'fail {"n":4}',
      'fail {"n":5}',
      'fail {"n":6}',
    ]);
    expect(shape(events)).toEqual(['reportStatus: charging', 'result']);
    expect(expectResult(events.at(-1) as TerminalEvent).payload).toEqual(['rejected', 'paid']);
    expectError(await run.killed, 'OOM');
  }, 40_000);

  it('three recorded answers pending at its divergence, a handler in flight: CRASH, slot freed, signal aborted, no span of its own', async () => {
    slow.length = 0;
    const before = starts.length;
    spans.reset();
    const run = await lostWith(
      `const a = tools.slow({ n: 1 }); const b = tools.slow({ n: 2 }); const c = tools.slow({ n: 3 });
       reportStatus('at ' + Date.now()); const r = [await a, await b, await c]; ${busy(1_500)} return r`,
      3,
      {
        beforeKill: async () => {
          slow[0]!.release('A');
          slow[1]!.release('B');
          await sleep(100);
        },
      },
    );
    const events = await run.events;
    expect(withoutClock(events)).toEqual(['reportStatus: at T', 'CRASH']);
    const error = expectError(events.at(-1) as TerminalEvent, 'CRASH');
    expect(error.details).toEqual({ collateral: true, replayDiverged: true });
    expect(error.stats).toMatchObject({ statusDropped: 0, heapUsedBytes: 0, dataRequests: 3 });
    expect(slow[2]!.signal.aborted).toBe(true);
    expect(engine.stats().active).toBe(0);
    slow[2]!.release('late');
    await sleep(200);
    expect(starts.slice(before)).toEqual(['slow {"n":1}', 'slow {"n":2}', 'slow {"n":3}']);
    expectError(await run.killed, 'OOM');
    const finished = () => spans.getFinishedSpans();
    await until(() => finished().filter((s) => s.name === 'coda.sandbox.execution').length === 2);
    // The first run's three calls and the killer's arm: none from the muted run.
    expect(finished().filter((s) => s.name === 'coda.sandbox.tool_call').length).toBe(4);
    const execution = finished().find(
      (s) =>
        s.name === 'coda.sandbox.execution' && s.attributes['coda.sandbox.outcome'] === 'CRASH',
    );
    expect(execution?.attributes['coda.sandbox.stats.status_dropped']).toBe(0);
  }, 40_000);

  // A second run that makes FEWER concurrent requests than the first waits for a recorded answer
  // the journal holds back behind the request it never makes. Its isolate reports that it waits
  // for nothing but answers (no code running, no timer pending), and the journal ends it: it
  // diverged. Before, it was held to its time limit (TIMEOUT, its reserved worker held).
  it('a second run making fewer concurrent requests than the first ends replayDiverged, not held to its time limit', async () => {
    slow.length = 0;
    const timeoutMs = 4_000;
    const switchAt = Date.now() + 700;
    const run = await lostWith(
      `const p = tools.slow({ n: 1 });
       const q = Date.now() < ${switchAt} ? tools.pay({ n: 2 }) : null;
       const r = await p; ${busy(1_500)} return [r, q === null ? null : await q];`,
      2,
      {
        limits: { timeoutMs },
        killAfter: switchAt,
        beforeKill: async () => {
          slow[0]!.release('answer');
          await sleep(100);
        },
      },
    );
    const events = await run.events;
    expect(run.newStarts()).toEqual(['slow {"n":1}', 'pay {"n":2}']);
    expectError(await run.killed, 'OOM');
    expect(shape(events)).toEqual(['CRASH']);
    const error = expectError(events[0] as TerminalEvent, 'CRASH');
    expect(error.details).toEqual({ collateral: true, replayDiverged: true });
    expect(error.message).toBe(
      divergedMessage('waited for answers without making a tool call the first run had made'),
    );
  }, 40_000);

  it('a second run missing a status before it waits ends replayDiverged, the status not shown twice', async () => {
    slow.length = 0;
    const switchAt = Date.now() + 700;
    const run = await lostWith(
      `const p = tools.slow({ n: 1 });
       if (Date.now() < ${switchAt}) reportStatus('early');
       const r = await p; ${busy(1_500)} return r;`,
      1,
      {
        killAfter: switchAt,
        beforeKill: async () => {
          slow[0]!.release('answer');
          await sleep(100);
        },
      },
    );
    const events = await run.events;
    expect(shape(events)).toEqual(['reportStatus: early', 'CRASH']);
    const error = expectError(events.at(-1) as TerminalEvent, 'CRASH');
    expect(error.message).toBe(
      divergedMessage('waited for answers without making a status event the first run had made'),
    );
    expect(run.newStarts()).toEqual(['slow {"n":1}']);
    expectError(await run.killed, 'OOM');
  }, 40_000);

  // Not idle: a pending timer is something the run still waits for besides answers. Taken for
  // idle, this run would end replayDiverged although it reproduces the first run exactly.
  it('a second run waiting on a timer before its next request reproduces the first run', async () => {
    slow.length = 0;
    const run = await lostWith(
      `const p = tools.slow({ n: 1 });
       await new Promise((resolve) => setTimeout(resolve, 600));
       const q = tools.pay({ n: 2 });
       const both = [await p, await q]; ${busy(1_500)} return both;`,
      2,
      {
        beforeKill: async () => {
          slow[0]!.release('answer');
          await sleep(100);
        },
      },
    );
    const events = await run.events;
    expect(shape(events)).toEqual(['result']);
    expect(expectResult(events[0] as TerminalEvent).payload).toEqual(['answer', 'paid']);
    expect(run.newStarts()).toEqual(['slow {"n":1}', 'pay {"n":2}']);
    expectError(await run.killed, 'OOM');
  }, 40_000);

  // From an attack on the idle report (stop 40): a FinalizationRegistry callback is a task the
  // garbage collector queues, neither an answer nor a timer, so the run looked idle before it made
  // pay(2). Ending it on that report ended a second run that reproduced its first exactly. A run
  // that made a registry no longer reports idle.
  it('a FinalizationRegistry callback that calls after the run looked idle: the second run reproduces its first', async () => {
    slow.length = 0;
    const run = await lostWith(
      `const fr = new FinalizationRegistry(() => { tools.pay({ n: 2 }).catch(() => {}); });
       const a = await tools.pay({ n: 1 });
       const p = tools.slow({ n: 3 });
       (function () { fr.register({}, 'x'); })();
       ${busy(100)}
       try { new ArrayBuffer(2 ** 52); } catch {}
       const r = await p; ${busy(1_500)} return [a, r];`,
      3,
      {
        beforeKill: async () => {
          slow[0]!.release('answer');
          await sleep(100);
        },
      },
    );
    const events = await run.events;
    expect(shape(events)).toEqual(['result']);
    expect(expectResult(events[0] as TerminalEvent).payload).toEqual(['paid', 'answer']);
    expect(run.newStarts()).toEqual(['pay {"n":1}', 'slow {"n":3}', 'pay {"n":2}']);
    expectError(await run.killed, 'OOM');
  }, 40_000);

  // From the same attack: the probe's answer was a promise, which isolated-vm resolves through
  // Promise.prototype.then. A replaced then saw every probe (the second run's count differed) or
  // dropped it (no report: held to TIMEOUT).
  it('a replaced Promise.prototype.then neither sees the probes nor stops them', async () => {
    slow.length = 0;
    const counted = await lostWith(
      `const then = Promise.prototype.then; let n = 0;
       Promise.prototype.then = function (a, b) { n++; return then.call(this, a, b); };
       const a = await tools.pay({ n: 1 }); ${busy(100)} const b = await tools.pay({ n: 2 });
       reportStatus('then calls: ' + n); ${busy(1_500)} return n;`,
      2,
    );
    const events = await counted.events;
    expect(shape(events).at(-1)).toBe('result');
    expect(counted.newStarts()).toEqual(['pay {"n":1}', 'pay {"n":2}']);
    expectError(await counted.killed, 'OOM');

    const switchAt = Date.now() + 700;
    const swallowed = await lostWith(
      `const then = Promise.prototype.then;
       Promise.prototype.then = function (a, b) { return then.call(this, (v) => { if (v !== '1') a(v); }, b); };
       const p = tools.slow({ n: 1 });
       const q = Date.now() < ${switchAt} ? tools.pay({ n: 2 }) : null;
       const r = await p; ${busy(1_500)} return [r, q === null ? null : await q];`,
      2,
      {
        limits: { timeoutMs: 4_000 },
        killAfter: switchAt,
        beforeKill: async () => {
          slow[0]!.release('answer');
          await sleep(100);
        },
      },
    );
    const error = expectError((await swallowed.events).at(-1) as TerminalEvent, 'CRASH');
    expect(error.message).toBe(
      divergedMessage('waited for answers without making a tool call the first run had made'),
    );
    expectError(await swallowed.killed, 'OOM');
  }, 40_000);

  // From a second attack (stop 40), on an early answer the journal gave an idle second run
  // instead of ending it: the handler that gave it may have depended on what the first run did
  // before it arrived (here, pay), so the run built a result on an order that never happened
  // (accepted 7 of 7). The answer stays at its place, and the run that waits for it diverged.
  it('an answer is never given before what the first run did before it arrived', async () => {
    slow.length = 0;
    const switchAt = Date.now() + 700;
    const run = await lostWith(
      `const order = []; const s = tools.slow({ n: 1 }).then((v) => { order.push('answer'); return v; });
       if (Date.now() < ${switchAt}) { await tools.pay({ n: 1 }); order.push('paid'); }
       await s;
       if (!order.includes('paid')) { await tools.pay({ n: 1 }); order.push('paid'); }
       ${busy(1_500)} return order;`,
      2,
      {
        killAfter: switchAt,
        beforeKill: async () => {
          slow[0]!.release('x');
          await sleep(100);
        },
      },
    );
    const error = expectError((await run.events).at(-1) as TerminalEvent, 'CRASH');
    expect(error.message).toBe(
      divergedMessage('waited for answers without making a tool call the first run had made'),
    );
    expect(run.newStarts()).toEqual(['slow {"n":1}', 'pay {"n":1}']);
    expectError(await run.killed, 'OOM');
  }, 40_000);

  // The same attack: a FinalizationRegistry callback's timer makes pay(2), and the code reacts to
  // the awaited answer at once. Any answer given on a report made before the callback ran (early,
  // or the divergence error) broke a run that reproduces its first.
  it('a FinalizationRegistry run reacting to its answer at once reproduces its first', async () => {
    slow.length = 0;
    const run = await lostWith(
      `const fr = new FinalizationRegistry(() => { setTimeout(() => tools.pay({ n: 2 }).catch(() => {}), 200); });
       const a = await tools.pay({ n: 1 });
       const p = tools.slow({ n: 3 });
       const got = p.then((v) => tools.pay({ got: v }));
       (function () { fr.register({}, 'x'); })();
       ${busy(100)}
       try { new ArrayBuffer(2 ** 52); } catch {}
       const r = await p; await got; ${busy(1_500)} return [a, r];`,
      3,
      {
        beforeKill: async () => {
          slow[0]!.release('answer');
          await until(() => starts.some((start) => start.startsWith('pay {"got"')));
          await sleep(100);
        },
      },
    );
    const events = await run.events;
    expect(shape(events)).toEqual(['result']);
    expect(run.newStarts()).toEqual([
      'pay {"n":1}',
      'slow {"n":3}',
      'pay {"n":2}',
      'pay {"got":"answer"}',
    ]);
    expectError(await run.killed, 'OOM');
  }, 40_000);

  // The constructor that notes a registry behaves as the one it replaces, and leaves no way to
  // the original: a registry made through it would be one the run is never taken idle for.
  it('FinalizationRegistry keeps its behaviour, and every way to make one is noted', async () => {
    const event = await engine.run({
      code: `class Mine extends FinalizationRegistry {}
        const plain = new FinalizationRegistry(() => {});
        const mine = new Mine(() => {});
        let called = 'no error';
        try { FinalizationRegistry(() => {}); } catch (error) { called = error.constructor.name; }
        return [
          plain instanceof FinalizationRegistry, mine instanceof FinalizationRegistry,
          mine instanceof Mine, typeof plain.register, typeof plain.unregister,
          FinalizationRegistry.prototype.constructor === FinalizationRegistry,
          Object.getPrototypeOf(plain).constructor === FinalizationRegistry,
          Object.getPrototypeOf(Mine) === FinalizationRegistry,
          FinalizationRegistry.name, FinalizationRegistry.length, called,
          Object.getOwnPropertyNames(globalThis).filter((name) => name.includes('Finalization')),
        ];`,
    });
    expect(expectResult(event as TerminalEvent).payload).toEqual([
      true,
      true,
      true,
      'function',
      'function',
      true,
      true,
      true,
      'FinalizationRegistry',
      1,
      'TypeError',
      ['FinalizationRegistry'],
    ]);
  });
});
