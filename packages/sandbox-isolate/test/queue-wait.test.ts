// A queued execution's timeoutMs starts when it starts running, and the wait in the queue has a
// bound of its own (maxQueueWaitMs), ending CAPACITY. The queue here is the host's: executions
// lost with a worker that another execution killed wait there to run again alone, one at a time.
import type { TerminalEvent } from '@coda/sandbox-core';
import { describe, expect, it } from 'vitest';
import { SandboxEngine } from '../src/index.ts';
import { expectError, expectResult } from './helpers.ts';

/** Kills its worker within milliseconds: V8 exhausts the isolate's heap, isolated-vm cannot recover. */
const heapKiller = {
  code: 'const m = new Map(); let i = 0; while (true) m.set(i++, { i });',
  limits: { memoryMb: 8 },
};
/** Busy for `ms` of wall time, then returns `tag`. */
const busy = (ms: number, tag: string) =>
  `const t = Date.now(); while (Date.now() - t < ${ms}) {} return '${tag}'`;

interface Timed {
  event: TerminalEvent;
  /** From submit to the terminal event, ms. */
  elapsedMs: number;
}

function timed(engine: SandboxEngine, request: Parameters<SandboxEngine['run']>[0]) {
  const submitted = performance.now();
  return engine
    .run(request)
    .then((event): Timed => ({ event, elapsedMs: performance.now() - submitted }));
}

/**
 * On one worker: `long` (4 s of work) and `short` (3 s of work, timeoutMs 4 000) run when a
 * third execution kills the worker (0.3 s after they start, well before either finishes); all
 * three run again alone, in submission order, so `short` waits in the host's queue for about
 * 4 s behind `long`, as long as its own timeoutMs.
 */
async function scenario(maxQueueWaitMs?: number) {
  const engine = new SandboxEngine({
    workers: 1,
    poolSize: 0,
    maxConcurrent: 8,
    ...(maxQueueWaitMs === undefined ? {} : { maxQueueWaitMs }),
  });
  try {
    await engine.ready();
    const long = timed(engine, { code: busy(4_000, 'long'), limits: { timeoutMs: 20_000 } });
    const short = timed(engine, { code: busy(3_000, 'short'), limits: { timeoutMs: 4_000 } });
    await new Promise((resolve) => setTimeout(resolve, 300));
    const killed = timed(engine, heapKiller);
    return { long: await long, short: await short, killer: await killed };
  } finally {
    await engine.dispose();
  }
}

describe('queue wait', () => {
  it('timeoutMs starts when a queued execution starts running, not when it was queued', async () => {
    const { long, short, killer } = await scenario();
    // Run again alone, it kills its own worker and ends with its own OOM.
    expectError(killer.event, 'OOM');
    expect(expectResult(long.event).payload).toBe('long');
    expect(expectResult(short.event).payload).toBe('short');
    // Its whole life (two starts and a wait behind `long`) was longer than its timeoutMs.
    expect(short.elapsedMs).toBeGreaterThan(4_000 + 3_000);
  }, 60_000);

  it('a queued execution that waits past maxQueueWaitMs ends CAPACITY naming the bound', async () => {
    const { long, short, killer } = await scenario(1_000);
    expect(expectResult(long.event).payload).toBe('long');
    // `short` and the killer itself (also run again alone: the worker cannot tell who killed
    // it) both wait behind `long`, past the bound.
    for (const queued of [short, killer]) {
      const refused = expectError(queued.event, 'CAPACITY');
      expect(refused.details).toEqual({ limit: 'maxQueueWaitMs', maxQueueWaitMs: 1_000 });
      expect(refused.message).toBe('No worker took the execution within maxQueueWaitMs (1000 ms)');
      // It did not wait for `long` to finish (4 s of work after the worker's death).
      expect(queued.elapsedMs).toBeLessThan(long.elapsedMs);
    }
  }, 60_000);
});
