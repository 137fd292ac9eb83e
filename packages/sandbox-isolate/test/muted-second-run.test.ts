// The muted second run (docs/isolate.md, "When the second run diverges"): a second run that
// diverged from its journal is muted, not stopped, and what it does next decides how it ends.
// Found by an attack on the change that muted it (stop 39): a second run waiting for a recorded
// answer when it diverged waited forever (TIMEOUT at its full limit), and the muted run's own
// figures (status dropped by its caps, its heap) reached the caller's stats; the rows after
// those are what held. Harness as test/attack-journal.test.ts: one worker, a killer parked in
// it, the victim lost with it and run again alone.
import type { Logger, SandboxEvent, TerminalEvent } from '@coda/sandbox-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SandboxEngine } from '../src/index.ts';
import { collect, expectError } from './helpers.ts';

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

const starts: string[] = [];
const armed: (() => void)[] = [];
const slow: { release: (value: unknown) => void; signal: AbortSignal }[] = [];
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
const engine = new SandboxEngine({
  workers: 1,
  poolSize: 0,
  maxQueueWaitMs: 10_000,
  logger,
  tools: {
    pay: {
      handler: (input) => {
        starts.push(`pay ${JSON.stringify(input)}`);
        return 'paid';
      },
    },
    arm: { handler: () => new Promise<null>((resolve) => armed.push(() => resolve(null))) },
    slow: {
      handler: (input, { signal }) => {
        starts.push(`slow ${JSON.stringify(input)}`);
        return new Promise((release) => slow.push({ release, signal }));
      },
    },
  },
});
beforeAll(() => engine.ready(), 60_000);
afterAll(() => engine.dispose());

function shape(events: SandboxEvent[]): string[] {
  return events.map((event) =>
    event.type === 'status'
      ? `${event.source}: ${event.message}`.replace(/\d{6,}/, 'T')
      : event.type === 'error'
        ? event.code
        : event.type,
  );
}

const divergedMessage = (how: string) =>
  `The execution was lost with a worker process another execution killed, and ran again; the second run ${how}, so it was ended rather than show the caller or a handler something twice`;

async function lostWith(
  code: string,
  calls: number,
  limits: Record<string, number> = { timeoutMs: 10_000 },
  beforeKill: () => Promise<void> = async () => {},
) {
  const deathsBefore = deaths.length;
  armed.length = 0;
  const killed = engine.run(killer);
  await until(() => armed.length === 1);
  const before = starts.length;
  const handle = engine.submit({ code, limits });
  const events = collect(handle);
  await until(() => starts.length - before === calls);
  await sleep(50);
  await beforeKill();
  const killedAt = performance.now();
  armed[0]!();
  await until(() => deaths.length > deathsBefore);
  expect(deaths[deathsBefore]).toBe(2);
  const secondRunStarts = () =>
    until(() => deaths.length - deathsBefore === 2).then(() => sleep(700));
  return {
    handle,
    events,
    killed,
    killedAt,
    secondRunStarts,
    newStarts: () => starts.slice(before),
  };
}

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
      { timeoutMs },
      async () => {
        slow[0]!.release('answer');
        await sleep(100);
      },
    );
    const events = await run.events;
    const tookMs = performance.now() - run.killedAt;
    expect(shape(events)).toEqual(['reportStatus: at T', 'CRASH']);
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
      { timeoutMs },
    );
    await run.secondRunStarts();
    slow[0]!.release('late answer');
    const releasedAt = performance.now();
    const events = await run.events;
    expect(shape(events)).toEqual(['reportStatus: at T', 'CRASH']);
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
      { timeoutMs: 10_000, maxStatusEvents: 5 },
    );
    const events = await run.events;
    expect(shape(events)).toEqual(['reportStatus: at T', 'CRASH']);
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
      { timeoutMs: 10_000, maxConsoleCalls: 5, memoryMb: 128 },
    );
    const events = await run.events;
    expect(shape(events)).toEqual(['console: at T', 'CRASH']);
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
    expect(shape(events)).toEqual(['reportStatus: at T', 'CANCELLED']);
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
    expect(shape(events)).toEqual(['reportStatus: at T', 'CRASH']);
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
    expect(shape(events)).toEqual(['console: at T', 'CRASH']);
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
      { timeoutMs },
    );
    const events = await run.events;
    expect(shape(events)).toEqual(['CRASH']);
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
      { timeoutMs: 10_000 },
      async () => {
        await sleep(400);
      },
    );
    const events = await run.events;
    expect(shape(events)).toEqual(['reportStatus: at T', 'CRASH']);
    expect(run.newStarts()).toEqual(['pay {"n":16}']);
    expectError(await run.killed, 'OOM');
  }, 30_000);
});
