// setTimeout and clearTimeout inside the isolate: bounded by maxTimers, inside the execution's
// time limit, gone with the execution. Real isolates in worker processes, plus the isolate
// runtime itself for what the host thread keeps.
import { defaultExecutionLimits, silentLogger } from '@coda/sandbox-core';
import { afterAll, describe, expect, it } from 'vitest';
import { SandboxEngine } from '../src/index.ts';
import { ExecutionTimers } from '../src/isolate/execution-timers.ts';
import { IsolateRuntime } from '../src/isolate/isolate-runtime.ts';
import type { JobHost } from '../src/isolate/job.ts';
import { expectError, expectResult } from './helpers.ts';

const engine = new SandboxEngine({ workers: 1 });
afterAll(() => engine.dispose());

const payloadOf = async (code: string, limits = {}) =>
  expectResult(await engine.run({ code, limits })).payload;

describe('setTimeout in user code', () => {
  it('resolves the awaited promise of the issue', async () => {
    const code = 'await new Promise((r) => setTimeout(r, 50)); return "waited"';
    expect(await payloadOf(code)).toBe('waited');
  });

  it('fires in order of due time, with the extra arguments', async () => {
    const code = `const order = [];
      setTimeout((a, b) => order.push(a + b), 20, 'b', '!');
      setTimeout(() => order.push('a'), 1);
      await new Promise((r) => setTimeout(r, 40));
      return order`;
    expect(await payloadOf(code)).toEqual(['a', 'b!']);
  });

  it('returns ids clearTimeout cancels; unknown ids are ignored', async () => {
    const code = `let fired = 0;
      const id = setTimeout(() => { fired++; }, 1);
      clearTimeout(id); clearTimeout(id); clearTimeout(12345); clearTimeout('x');
      await new Promise((r) => setTimeout(r, 20));
      return [typeof id, fired]`;
    expect(await payloadOf(code)).toEqual(['number', 0]);
  });

  it(`refuses timer ${defaultExecutionLimits.maxTimers + 1} inside the isolate, naming maxTimers`, async () => {
    const code = `for (let i = 0; i < 100; i++) setTimeout(() => {}, 60_000);
      try { setTimeout(() => {}, 1); } catch (error) { return error.name + ': ' + error.message; }`;
    expect(await payloadOf(code)).toBe(
      'RangeError: setTimeout: 100 timers are pending, the most maxTimers (100) allows: clear one or wait for one before setting another',
    );
  });

  it('counts only pending timers: one that fired or was cleared frees its place', async () => {
    const code = `await new Promise((r) => setTimeout(r, 1));
      clearTimeout(setTimeout(() => {}, 60_000));
      setTimeout(() => {}, 60_000);
      return 'set'`;
    expect(await payloadOf(code, { maxTimers: 1 })).toBe('set');
  });

  it('allows none with maxTimers 0, and the error names the limit', async () => {
    const event = expectError(
      await engine.run({ code: 'setTimeout(() => {}, 1)', limits: { maxTimers: 0 } }),
      'RUNTIME',
    );
    expect(event.message).toBe(
      'RangeError: setTimeout: 0 timers are pending, the most maxTimers (0) allows: clear one or wait for one before setting another',
    );
    expect(event.details?.location).toEqual({ line: 1, column: 1 });
  });

  it('refuses a callback that is not a function (a string is never evaluated)', async () => {
    const event = expectError(await engine.run({ code: "setTimeout('1 + 1', 1)" }), 'RUNTIME');
    expect(event.message).toBe(
      'TypeError: setTimeout: the callback must be a function (a string is not evaluated)',
    );
  });

  it('ends with TIMEOUT at the time limit when code waits for a timer due after it', async () => {
    const event = expectError(
      await engine.run({
        code: 'await new Promise((r) => setTimeout(r, 60_000)); return 1',
        limits: { timeoutMs: 300 },
      }),
      'TIMEOUT',
    );
    expect(event.details).toEqual({ timeoutMs: 300 });
  });

  it('ends the execution with the error of a callback that throws, at its line', async () => {
    const code = `await new Promise(() => {
  setTimeout(() => {
    null.total;
  }, 1);
});`;
    const event = expectError(await engine.run({ code }), 'RUNTIME');
    expect(event.message).toBe("TypeError: Cannot read properties of null (reading 'total')");
    expect(event.details?.location).toEqual({ line: 3, column: 10 });
    expect(event.details?.sourceLine).toBe('    null.total;');
  });

  it('keeps the outcome of code that returned before a timer it left behind', async () => {
    const code = "setTimeout(() => { throw new Error('late'); }, 1); return 'early'";
    expect(await payloadOf(code)).toBe('early');
  });

  it('works after user code replaced every builtin the bootstrap could use', async () => {
    const code = `Reflect.apply = () => { throw new Error('apply'); };
      Function.prototype.apply = Function.prototype.call = () => { throw new Error('call'); };
      for (const name of ['callback', 'args', '1', '2'])
        Object.defineProperty(Object.prototype, name, { configurable: true,
          set() { throw new Error(name); }, get() { return 'forged'; } });
      const first = await new Promise((r) => setTimeout(r, 1, 'fired'));
      let second = 'not fired';
      clearTimeout(setTimeout(() => { second = 'fired'; }, 1));
      await new Promise((r) => setTimeout(r, 10));
      return [first, second]`;
    expect(await payloadOf(code)).toEqual(['fired', 'not fired']);
  });

  it('ends with the error of a Promise.prototype.then user code broke, as a data request does', async () => {
    const code = `Promise.prototype.then = function () { throw new Error('then is mine'); };
      await new Promise((r) => setTimeout(r, 1));
      return 'not reached'`;
    const event = expectError(await engine.run({ code }), 'RUNTIME');
    expect(event.message).toBe('Error: then is mine');
  });
});

describe('in-process mode', () => {
  const local = new SandboxEngine({ isolation: 'in-process' });
  afterAll(() => local.dispose());

  it('waits for a timer, and refuses one over maxTimers', async () => {
    const code = `await new Promise((r) => setTimeout(r, 20));
      try { setTimeout(() => {}, 1); setTimeout(() => {}, 1); } catch (error) { return error.message; }`;
    const event = await local.run({ code, limits: { maxTimers: 1 } });
    expect(expectResult(event).payload).toBe(
      'setTimeout: 1 timers are pending, the most maxTimers (1) allows: clear one or wait for one before setting another',
    );
  });
});

describe('what the host thread keeps', () => {
  const host: JobHost = {
    status() {},
    data: async () => ({ ok: false, message: 'no data' }),
    dispatched() {},
  };
  const runtime = new IsolateRuntime(
    {
      maxConcurrent: 2,
      poolSize: 0,
      poolMemoryMb: 32,
      logger: silentLogger,
      onCatastrophicError: () => {},
    },
    [],
  );
  afterAll(() => runtime.manager.dispose());
  let jobs = 0;
  const run = (code: string, signal?: AbortSignal) =>
    runtime.execute(
      { id: String(++jobs), code, limits: { ...defaultExecutionLimits, memoryMb: 32 } },
      host,
      signal,
    );
  const nodeTimers = () =>
    process.getActiveResourcesInfo().filter((name) => name === 'Timeout').length;
  // The engine's own short timers (an isolate's release, 1 ms) come and go around a run: a leak
  // is a count that stays above the one before, not one that is above it for a moment.
  const noTimerLeftAbove = (before: number) =>
    expect.poll(nodeTimers, { timeout: 2_000, interval: 20 }).toBeLessThanOrEqual(before);

  it('clears every timer when the execution returns, with 50 still pending', async () => {
    await run('return 0');
    const before = nodeTimers();
    const outcome = await run(
      'for (let i = 0; i < 50; i++) setTimeout(() => {}, 60_000); return 1',
    );
    expect(outcome).toMatchObject({ kind: 'result', json: '1' });
    await noTimerLeftAbove(before);
  });

  it('clears every timer when the execution is cancelled while waiting for one', async () => {
    await run('return 0');
    const before = nodeTimers();
    const controller = new AbortController();
    const pending = run(
      'for (let i = 0; i < 50; i++) setTimeout(() => {}, 60_000); await new Promise((r) => setTimeout(r, 60_000))',
      controller.signal,
    );
    await new Promise((resolve) => setTimeout(resolve, 50));
    controller.abort();
    expect(await pending).toMatchObject({ kind: 'error', error: { code: 'CANCELLED' } });
    await noTimerLeftAbove(before);
  });
});

describe('ExecutionTimers', () => {
  it('bounds its own count and ids, whatever the isolate says', async () => {
    const timers = new ExecutionTimers(10_000, 2, performance.now());
    const first = timers.start(1, 60_000);
    expect(await Promise.race([timers.start(1, 1), first])).toBe('0');
    void timers.start(2, 60_000);
    expect(await timers.start(3, 1)).toBe('0');
    expect(await timers.start('4', 1)).toBe('0');
    expect(timers.size).toBe(2);
    timers.close();
    expect(await first).toBe('0');
    expect(timers.size).toBe(0);
  });

  it('schedules nothing past the deadline; close ends such a timer too', async () => {
    const timers = new ExecutionTimers(100, 10, performance.now());
    const late = timers.start(1, 500);
    expect(timers.size).toBe(1);
    timers.close();
    expect(await late).toBe('0');
    expect(await timers.start(2, 1)).toBe('0');
  });

  it('fires a due timer once, and clear answers a pending one at once', async () => {
    const timers = new ExecutionTimers(10_000, 10, performance.now());
    expect(await timers.start(1, 1)).toBe('1');
    const cleared = timers.start(2, 60_000);
    timers.clear(2);
    expect(await cleared).toBe('0');
    expect(timers.size).toBe(0);
  });
});
