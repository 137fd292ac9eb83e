// One execution's failure does not end the executions that shared its worker process: those that
// had not reached the host run again, alone, and finish as if nothing happened; those that had
// end with a CRASH that says it was collateral. Retries are bounded: a job that kills its worker
// again, alone, ends with its own error.
import type { Logger, TerminalEvent } from '@coda/sandbox-core';
import { afterAll, describe, expect, it } from 'vitest';
import { SandboxEngine } from '../src/index.ts';
import { collect, expectError, expectResult } from './helpers.ts';

/** Kills its worker: V8 aborts the process ("Fatal JavaScript invalid size error"). */
const fatal = { code: "return 'x'.repeat(2 ** 28).split('').length" };
/** Kills its worker: V8 exhausts the isolate's heap, and isolated-vm cannot recover. */
const heapExhaustion = {
  code: 'const m = new Map(); let i = 0; while (true) m.set(i++, { i });',
  limits: { memoryMb: 8 },
};

/** Benign CPU work with an exact result, long enough to be running when a co-tenant dies. */
function benign(i: number): { code: string } {
  return { code: `let s = 0; for (let k = 0; k < 2e7; k++) s += k % 7; return [${i}, s]` };
}
const benignSum = (() => {
  let s = 0;
  for (let k = 0; k < 2e7; k++) s += k % 7;
  return s;
})();

/** A logger that records the jobs run again and the worker deaths. */
function recordingLogger() {
  const retried: string[] = [];
  const deaths: { jobs: number; reason?: string }[] = [];
  const logger: Logger = {
    debug: () => {},
    info: (object: unknown, message?: string) => {
      if (message?.includes('running it again alone')) {
        retried.push((object as { jobId: string }).jobId);
      }
    },
    warn: (object: unknown, message?: string) => {
      if (message === 'sandbox worker process ended') {
        deaths.push(object as { jobs: number; reason?: string });
      }
    },
    error: () => {},
  };
  return { logger, retried, deaths };
}

describe('co-tenant survival', () => {
  it('50 worker-killing and 10 benign executions submitted together: 0 benign failures', async () => {
    const { logger, retried, deaths } = recordingLogger();
    const engine = new SandboxEngine({ workers: 2, poolSize: 0, maxConcurrent: 64, logger });
    try {
      await engine.ready();
      const runs: {
        kind: 'benign' | 'fatal' | 'heap';
        index: number;
        event: Promise<TerminalEvent>;
      }[] = [];
      // Interleaved: one benign every sixth submission, a fatal error every fifth.
      let benignCount = 0;
      for (let i = 0; i < 60; i++) {
        if (i % 6 === 0) {
          const index = benignCount++;
          runs.push({ kind: 'benign', index, event: engine.run(benign(index)) });
        } else if (i % 5 === 1) runs.push({ kind: 'fatal', index: i, event: engine.run(fatal) });
        else runs.push({ kind: 'heap', index: i, event: engine.run(heapExhaustion) });
      }
      const counts = { benign: 0, fatal: 0, heap: 0 };
      for (const run of runs) {
        const event = await run.event;
        counts[run.kind]++;
        if (run.kind === 'benign') {
          expect(expectResult(event).payload).toEqual([run.index, benignSum]);
        } else if (run.kind === 'fatal') {
          const error = expectError(event, 'CRASH');
          expect(error.message).toContain('Fatal JavaScript invalid size error');
          expect(error.details?.collateral).toBeUndefined();
        } else {
          const error = expectError(event, 'OOM');
          expect(error.details).toMatchObject({ memoryMb: 8 });
        }
      }
      expect(counts).toEqual({ benign: 10, fatal: 10, heap: 40 });
      // Workers died with many executions at once, and those executions were run again.
      expect(deaths.some((death) => death.jobs > 1)).toBe(true);
      expect(retried.length).toBeGreaterThan(0);
      expect(new Set(retried).size).toBe(retried.length);
      expect(engine.stats().active).toBe(0);
      const after = await engine.run({ code: 'return "fresh"' });
      expect(expectResult(after).payload).toBe('fresh');
    } finally {
      await engine.dispose();
    }
  }, 120_000);

  describe('in one shared worker', () => {
    const recording = recordingLogger();
    const engine = new SandboxEngine({
      workers: 1,
      poolSize: 0,
      logger: recording.logger,
      dataHandler: async () => 'answered',
    });
    afterAll(() => engine.dispose());

    it('a co-tenant that reached the host ends as collateral, once; one that had not finishes', async () => {
      await engine.ready();
      const limits = { timeoutMs: 20_000 };
      const statusHandle = engine.submit({
        code: 'reportStatus("started"); for (;;) {}',
        limits,
      });
      const statusEvents = collect(statusHandle);
      const dataHandle = engine.submit({
        code: 'await dataProxy.request({}); for (;;) {}',
        limits,
      });
      const quiet = engine.run({
        // Long enough that it is still running when the worker-killer arrives, on a loaded machine.
        code: 'const end = Date.now() + 4_000; while (Date.now() < end) {} return "quiet ok"',
        limits,
      });
      // Both have reached the host before the worker dies.
      await until(() => engine.stats().active === 3);
      await new Promise((resolve) => setTimeout(resolve, 300));
      const deathsBefore = recording.deaths.length;
      const hostile = engine.run(fatal);

      const events = await statusEvents;
      expect(events.map((event) => event.type)).toEqual(['status', 'error']);
      expect(events[0]).toMatchObject({ type: 'status', message: 'started' });
      const collateral = expectError(events[1] as TerminalEvent, 'CRASH');
      expect(collateral.details).toEqual({ collateral: true, coTenants: 3 });
      expect(collateral.message).toContain('Fatal JavaScript invalid size error');
      expect(collateral.message).toContain(
        'it had already reached the host, so it was not run again',
      );
      expect(collateral.stats?.statusEvents).toBe(1);

      const data = expectError(await dataHandle.result, 'CRASH');
      expect(data.details).toEqual({ collateral: true, coTenants: 3 });
      expect(data.stats?.dataRequests).toBe(1);

      // The quiet one ran again, alone, and the worker-killer too: it ends with its own CRASH.
      expect(expectResult(await quiet).payload).toBe('quiet ok');
      const own = expectError(await hostile, 'CRASH');
      expect(own.details).toBeUndefined();
      expect(own.message).toBe(
        "The execution's worker process died: V8 aborted the worker process (SIGTRAP): Fatal JavaScript invalid size error 268435456 (see crbug.com/1201626)",
      );
      expect(recording.deaths.slice(deathsBefore).map((death) => death.jobs)).toEqual([4, 1]);
      expect(recording.retried).toHaveLength(2);
    }, 30_000);

    it('retries are bounded: a job that kills its worker again, alone, ends with its own error', async () => {
      await engine.ready();
      const deathsBefore = recording.deaths.length;
      const retriedBefore = recording.retried.length;
      const idsBefore = new Set(recording.retried);
      const quiet = engine.run({
        code: 'const end = Date.now() + 4_000; while (Date.now() < end) {} return "still here"',
      });
      await until(() => engine.stats().active === 1);
      const hostile = await engine.run(heapExhaustion);
      expect(expectError(hostile, 'OOM').message).toContain('exhausted memory');
      expect(expectResult(await quiet).payload).toBe('still here');
      // Two runs of the worker-killer (the second alone), and no third: each of the two jobs
      // was run again once.
      expect(recording.retried.length - retriedBefore).toBe(2);
      expect(new Set(recording.retried).size).toBe(idsBefore.size + 2);
      const deaths = recording.deaths.slice(deathsBefore).map((death) => death.jobs);
      expect(deaths).toEqual([2, 1]);
    }, 30_000);
  });

  it('a co-tenant of code V8 cannot interrupt finishes, and the code ends with its own TIMEOUT', async () => {
    // A loose worker bound: the host's deadline, not the memory bound, kills the worker.
    const engine = new SandboxEngine({ workers: 1, poolSize: 0, workerBaseMemoryMb: 4_096 });
    try {
      await engine.ready();
      const quiet = engine.run({
        code: 'const end = Date.now() + 4_000; while (Date.now() < end) {} return "outlived it"',
      });
      await until(() => engine.stats().active === 1);
      const stuck = await engine.run({
        code: 'Array(1e9).fill(0); return 1',
        limits: { memoryMb: 32, timeoutMs: 500 },
      });
      expect(expectError(stuck, 'TIMEOUT').details).toEqual({ timeoutMs: 500 });
      expect(expectResult(await quiet).payload).toBe('outlived it');
    } finally {
      await engine.dispose();
    }
  }, 30_000);
});

async function until(done: () => boolean): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (!done()) {
    if (Date.now() > deadline) throw new Error('condition not reached');
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}
