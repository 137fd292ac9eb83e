// User code that starts on the calling thread (isolated-vm's applySync; what a worker process
// does with a job it holds alone) ends exactly as code started on the isolate's own thread, and
// the engine keeps such a start from holding up other executions.
import { readFileSync } from 'node:fs';
import { type ExecutionLimits, resolveExecutionLimits, silentLogger } from '@coda/sandbox-core';
import { afterAll, describe, expect, it } from 'vitest';
import { WorkerBackend } from '../src/backend/worker-backend.ts';
import { SandboxEngine } from '../src/index.ts';
import { IsolateRuntime } from '../src/isolate/isolate-runtime.ts';
import type { DataAnswer, JobHost, JobOutcome, SynchronousStart } from '../src/isolate/job.ts';
import { expectError, expectHealthy, expectResult } from './helpers.ts';

const limits: ExecutionLimits = resolveExecutionLimits({ timeoutMs: 500, memoryMb: 32 });
const runtime = new IsolateRuntime(
  {
    maxConcurrent: 4,
    poolSize: 1,
    poolMemoryMb: 32,
    logger: silentLogger,
    onCatastrophicError() {},
  },
  [],
);
afterAll(() => runtime.manager.dispose());

/** A host whose data requests answer after a few milliseconds, as a real data handler does. */
const host: JobHost = {
  status() {},
  async data(paramsJson): Promise<DataAnswer> {
    await new Promise((resolve) => setTimeout(resolve, 5));
    return { ok: true, json: paramsJson ?? 'null' };
  },
};

/** Records what the executor asked of a synchronous start. */
function recordingStart(allowed: boolean) {
  const calls: string[] = [];
  const start: SynchronousStart = {
    allowed: () => {
      calls.push('allowed');
      return allowed;
    },
    yielded: () => calls.push('yielded'),
  };
  return { start, calls };
}

let jobs = 0;

/** Resolves once `done()` holds, or after 10 s (the caller's assertion then says what failed). */
async function until(done: () => boolean): Promise<void> {
  const deadline = performance.now() + 10_000;
  while (!done() && performance.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 2));
  }
}

/** Of `pids`, the process that used the most CPU over the next 100 ms (Linux /proc). */
async function busiestOf(pids: number[]): Promise<number> {
  const cpu = (pid: number) => {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
    return Number(fields[11]) + Number(fields[12]);
  };
  const before = pids.map(cpu);
  await new Promise((resolve) => setTimeout(resolve, 100));
  const used = pids.map((pid, index) => cpu(pid) - before[index]!);
  return pids[used.indexOf(Math.max(...used))]!;
}
function run(code: string, start?: SynchronousStart): Promise<JobOutcome> {
  return runtime.execute({ id: String(++jobs), code, limits }, host, undefined, start);
}

/** What an outcome amounts to, without timings. */
function summary(outcome: JobOutcome): unknown {
  return outcome.kind === 'result'
    ? { result: outcome.json }
    : { code: outcome.error.code, message: outcome.error.message };
}

describe('a synchronous start', () => {
  it.each([
    ['a value', 'return 1 + 2'],
    [
      'a value after a data request',
      'const echo = await dataProxy.request({ n: 2 }); return echo.n',
    ],
    ['a thrown error', "throw new TypeError('nope')"],
    ['a syntax error', 'return ('],
    ['a value after a timer', 'await new Promise((r) => setTimeout(r, 5)); return 3'],
    [
      'a timer callback that throws while user code waits',
      "await new Promise(() => setTimeout(() => { throw new RangeError('late'); }, 1))",
    ],
    ['a rejection nobody handles, then a value', "Promise.reject(new Error('stray')); return 4"],
    [
      'a rejection nobody handles, then waiting forever',
      "Promise.reject(new Error('stray')); await new Promise(() => {})",
    ],
    ['an endless loop', 'while (true) {}'],
    ['an endless loop after a data request', 'await dataProxy.request(1); while (true) {}'],
    ['an endless loop in a promise callback', 'await null; while (true) {}'],
    ['a promise that never settles', 'await new Promise(() => {})'],
    [
      'a result over the depth limit',
      'let v = []; for (let i = 0; i < 2_100; i++) v = [v]; return v',
    ],
    ['a console call and a status report', "console.log('a'); reportStatus('b'); return 5"],
    [
      'a value, then a loop in a later promise callback',
      '(async () => { for (let i = 0; i < 20; i++) await null; for (;;) {} })(); return 1',
    ],
  ])('ends %s exactly as a start on the isolate thread does', async (_name, code) => {
    const here = recordingStart(true);
    const onThread = await run(code);
    const onCaller = await run(code, here.start);
    expect(summary(onCaller)).toEqual(summary(onThread));
    expect(here.calls[0]).toBe('allowed');
  });

  it('tells the caller when user code waits on the host, and only then', async () => {
    const trivial = recordingStart(true);
    expect(summary(await run('return 1', trivial.start))).toEqual({ result: '1' });
    expect(trivial.calls).toEqual(['allowed']);

    const waiting = recordingStart(true);
    const outcome = await run('return (await dataProxy.request({ v: 7 })).v', waiting.start);
    expect(summary(outcome)).toEqual({ result: '7' });
    expect(waiting.calls).toEqual(['allowed', 'yielded']);
  });

  it('starts on the isolate thread when no longer allowed, and says so at once', async () => {
    const refused = recordingStart(false);
    expect(summary(await run('return 2', refused.start))).toEqual({ result: '2' });
    expect(refused.calls).toEqual(['allowed', 'yielded']);
  });

  it('disposes the isolates released before it, so code they still run stops first', async () => {
    const earlier = await runtime.manager.acquire();
    // A warm isolate for the next execution, so that it starts before the release timer fires.
    await runtime.manager.warm();
    runtime.manager.release(earlier);
    let disposedWhenItRan: boolean | undefined;
    const watching: JobHost = {
      ...host,
      status() {
        disposedWhenItRan = earlier.isolate.isDisposed;
      },
    };
    const outcome = await runtime.execute(
      { id: String(++jobs), code: "reportStatus('running'); return 1", limits },
      watching,
      undefined,
      recordingStart(true).start,
    );
    expect(summary(outcome)).toEqual({ result: '1' });
    expect(disposedWhenItRan).toBe(true);
  });

  it('does not turn code that finished in time into TIMEOUT because the host stalled', async () => {
    // As user code starts it reports a status; the host then keeps its event loop busy for
    // 200 ms while the isolate finishes in about 5, well within its 100 ms.
    const stalling: JobHost = {
      ...host,
      status() {
        setTimeout(() => {
          const end = performance.now() + 200;
          while (performance.now() < end) {}
        }, 1);
      },
    };
    const code =
      "reportStatus('go'); const end = Date.now() + 5; while (Date.now() < end) {} return 1";
    const quick = { id: String(++jobs), code, limits: { ...limits, timeoutMs: 100 } };
    expect(summary(await runtime.execute(quick, stalling))).toEqual({ result: '1' });
  });

  it('is bounded by the time limit: an endless loop ends with TIMEOUT at about timeoutMs', async () => {
    const started = performance.now();
    const outcome = await run('while (true) {}', recordingStart(true).start);
    expect(outcome.kind === 'error' && outcome.error.code).toBe('TIMEOUT');
    expect(performance.now() - started).toBeLessThan(limits.timeoutMs + 1_000);
  });
});

describe('worker processes and main-thread starts', () => {
  const twoWorkers = () =>
    new WorkerBackend({
      workers: 2,
      maxConcurrent: 4,
      maxQueueWaitMs: 30_000,
      poolSize: 1,
      poolMemoryMb: 32,
      workerBaseMemoryMb: 256,
      wasmModules: [],
      defaultLimits: limits,
      logger: silentLogger,
    });

  it('mark a main thread taken while user code runs there, and free once it waits on the host', async () => {
    const backend = twoWorkers();
    try {
      await backend.ready();
      const taken = () => backend.workers.filter((worker) => worker.mainThreadTaken).length;
      const signal = new AbortController().signal;
      const job = (code: string) => ({ id: String(++jobs), code, limits });
      const loop = backend.execute(
        job('const end = Date.now() + 300; while (Date.now() < end) {}'),
        host,
        signal,
      );
      await new Promise((resolve) => setTimeout(resolve, 100));
      expect(taken()).toBe(1);
      expect(summary(await loop)).toEqual({ result: 'null' });
      expect(taken()).toBe(0);

      const slowHost: JobHost = {
        ...host,
        data: () =>
          new Promise((resolve) => setTimeout(() => resolve({ ok: true, json: '1' }), 400)),
      };
      const waiting = backend.execute(job('return await dataProxy.request(0)'), slowHost, signal);
      await new Promise((resolve) => setTimeout(resolve, 100));
      expect(taken()).toBe(0);
      expect(summary(await waiting)).toEqual({ result: '1' });
    } finally {
      await backend.dispose();
    }
  }, 20_000);

  it('answer every held job: aborted before it is held, and after the taken worker dies', async () => {
    const backend = twoWorkers();
    const alive = () => backend.workers.filter((worker) => worker.alive);
    try {
      await backend.ready();
      const signal = new AbortController().signal;
      const job = (code: string) => ({
        id: String(++jobs),
        code,
        limits: { ...limits, timeoutMs: 5_000 },
      });
      const loop = backend.execute(job('for (;;) {}'), host, signal);
      await until(() => backend.workers.some((worker) => worker.mainThreadTaken));
      const looping = backend.workers.find((worker) => worker.mainThreadTaken)!;
      // The other worker dies, and its replacement too before it is ready (then a back-off).
      const other = backend.workers.find((worker) => worker !== looping)!;
      other.kill();
      await until(
        () => backend.workers.every((worker) => worker !== other) && alive().length === 2,
      );
      backend.workers.find((worker) => worker !== looping)!.kill();
      await until(() => alive().length === 1);

      const aborted = await backend.execute(job('return 0'), host, AbortSignal.abort('no'));
      expect(aborted.kind === 'error' && aborted.error.code).toBe('CANCELLED');
      const held = backend.execute(job('return 42'), host, signal);
      // The worker the loop held dies: the held job waits for a replacement, not an error.
      looping.kill();
      const ended = await loop;
      expect(ended.kind === 'error' && ended.error.code).toBe('CANCELLED');
      expect(summary(await held)).toEqual({ result: '42' });
    } finally {
      await backend.dispose();
    }
  }, 30_000);
});

describe('the engine and main-thread starts (two workers, the default)', () => {
  const engine = new SandboxEngine({
    limits: { timeoutMs: 4_000, memoryMb: 32 },
    dataHandler: async (params) => {
      await new Promise((resolve) => setTimeout(resolve, (params as { ms: number }).ms));
      return 'waited';
    },
  });
  afterAll(() => engine.dispose());

  async function waitForPids(done: (pids: number[]) => boolean): Promise<number[]> {
    await until(() => done(engine.stats().workerPids));
    return engine.stats().workerPids;
  }

  it('sends other executions past a worker whose main thread runs a loop, to one whose code waits', async () => {
    await engine.ready();
    // On one worker's main thread, then waiting on the host; then a loop on the other's.
    const waiting = engine.run({ code: 'return await dataProxy.request({ ms: 3_000 })' });
    await new Promise((resolve) => setTimeout(resolve, 100));
    const loop = engine.run({
      code: 'const end = Date.now() + 2_000; while (Date.now() < end) {} return "looped"',
    });
    await new Promise((resolve) => setTimeout(resolve, 100));
    const started = performance.now();
    for (let i = 0; i < 5; i++) {
      expect(expectResult(await engine.run({ code: `return ${i}` })).payload).toBe(i);
    }
    expect(performance.now() - started).toBeLessThan(1_500);
    expect(expectResult(await loop).payload).toBe('looped');
    expect(expectResult(await waiting).payload).toBe('waited');
  }, 20_000);

  it('holds other executions on the host while no live worker has a free main thread', async () => {
    await engine.ready();
    const loop = engine.run({ code: 'for (;;) {}', limits: { timeoutMs: 3_000, memoryMb: 32 } });
    await new Promise((resolve) => setTimeout(resolve, 100));
    // The other worker dies, and so does its replacement before it is ready: the next one comes
    // after a back-off, and meanwhile the looping worker is the only one alive.
    const [first, second] = engine.stats().workerPids;
    const looping = await busiestOf([first!, second!]);
    const other = looping === first ? second! : first!;
    process.kill(other, 'SIGKILL');
    const replacement = await waitForPids((pids) => pids.length === 2 && !pids.includes(other));
    process.kill(replacement.find((pid) => pid !== looping)!, 'SIGKILL');
    await waitForPids((pids) => pids.length === 1);
    // A held execution that is cancelled frees its slot at once.
    const cancelled = engine.submit({ code: 'return 0' });
    await new Promise((resolve) => setTimeout(resolve, 5));
    expect(engine.stats().active).toBe(2);
    cancelled.cancel('not needed');
    expectError(await cancelled.result, 'CANCELLED');
    await new Promise((resolve) => setTimeout(resolve, 5));
    expect(engine.stats().active).toBe(1);
    const quick = await engine.run({ code: 'return 42', limits: { timeoutMs: 500, memoryMb: 32 } });
    // It waited on the host, not behind the loop: no timeout for it, and no kill of the loop.
    expect(expectResult(quick).payload).toBe(42);
    const error = expectError(await loop, 'TIMEOUT');
    expect(error.message).toBe('Execution timed out after 3000 ms');
    await expectHealthy(engine);
  }, 30_000);

  it('ends heap exhaustion on a main thread with OOM, long before the time limit', async () => {
    await engine.ready();
    const before = engine.stats().workerPids;
    const started = performance.now();
    const event = await engine.run({
      code: 'const m = new Map(); let i = 0; while (true) m.set(i++, { i });',
      limits: { timeoutMs: 20_000, memoryMb: 32 },
    });
    const error = expectError(event, 'OOM');
    expect(error.details).toMatchObject({ memoryMb: 32 });
    expect(performance.now() - started).toBeLessThan(10_000);
    await engine.ready();
    expect(engine.stats().workerPids).not.toEqual(before);
    await expectHealthy(engine);
  }, 30_000);

  it('cancels a loop on a main thread at once; its worker is replaced and the others go on', async () => {
    await engine.ready();
    const handle = engine.submit({ code: 'while (true) {}', limits: { timeoutMs: 20_000 } });
    await new Promise((resolve) => setTimeout(resolve, 100));
    const started = performance.now();
    handle.cancel('stop');
    expectError(await handle.result, 'CANCELLED');
    expect(performance.now() - started).toBeLessThan(100);
    expect(expectResult(await engine.run({ code: 'return "meanwhile"' })).payload).toBe(
      'meanwhile',
    );
    // The worker cannot read the abort while the loop holds its main thread: the supervisor
    // replaces it 250 ms later (a worker with other jobs would get 2 s), not at the time limit.
    await until(() => engine.stats().active === 0);
    expect(engine.stats().active).toBe(0);
    expect(performance.now() - started).toBeLessThan(1_500);
    await expectHealthy(engine);
  }, 30_000);
});
