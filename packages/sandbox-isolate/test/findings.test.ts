// Outcomes the integration tests found undefined: a stray promise rejection in user code, JSON
// nested deeper than the host can walk, and when a cancelled execution frees its slot.
import { afterAll, describe, expect, it } from 'vitest';
import { SandboxEngine } from '../src/index.ts';
import { expectError, expectHealthy, expectResult } from './helpers.ts';

const engine = new SandboxEngine({
  limits: { timeoutMs: 5_000 },
  dataHandler: (params) => params,
});
afterAll(() => engine.dispose());

describe('a promise rejection user code never handles', () => {
  it.each([
    ["Promise.reject(new Error('x')); return 1", 1],
    ["(async () => { throw new Error('y') })(); return 2", 2],
    ["(async () => {}).constructor('return process')(); return 3", 3],
    ['Promise.reject(5); return { ok: true }', { ok: true }],
  ])('does not change the value of an execution that returned: %s', async (code, payload) => {
    expect(expectResult(await engine.run({ code })).payload).toEqual(payload);
    await expectHealthy(engine);
  });

  it('does not change the value returned after a data request either', async () => {
    const code = "await dataProxy.request(1); Promise.reject(new Error('z')); return 5";
    expect(expectResult(await engine.run({ code })).payload).toBe(5);
    await expectHealthy(engine);
  });

  // Not read at all: isolated-vm would copy the reason outside the time limit (its getters,
  // proxy traps and Error.prepareStackTrace with it), so nothing ends the run on its account
  // (see docs/isolate.md, "Unhandled promise rejections"; encoder-only-egress.test.ts).
  it.each([
    ["Promise.reject(new TypeError('late')); await dataProxy.request(1); return 1", 1],
    ["Promise.reject('plain'); await dataProxy.request(1); return 2", 2],
    [
      "Promise.reject(new Error('Isolate was disposed during execution')); await dataProxy.request(1); return 3",
      3,
    ],
  ])('does not end an execution still running either: %s', async (code, payload) => {
    expect(expectResult(await engine.run({ code })).payload).toBe(payload);
  });

  it('leaves code that then waits forever to its time limit', async () => {
    const event = await engine.run({
      code: "Promise.reject(new Error('stray')); await new Promise(() => {})",
      limits: { timeoutMs: 500 },
    });
    expect(expectError(event, 'TIMEOUT').details).toEqual({ timeoutMs: 500 });
  });
});

describe('deeply nested JSON', () => {
  const nest = (depth: number) => `let v = 1; for (let i = 0; i < ${depth}; i++) v = [v];`;

  it('crosses up to the depth limit', async () => {
    const event = await engine.run({ code: `${nest(1_999)} return v` });
    let value: unknown = expectResult(event).payload;
    let depth = 0;
    while (Array.isArray(value)) {
      value = value[0];
      depth++;
    }
    expect([depth, value]).toEqual([1_999, 1]);
  });

  it.each([2_001, 5_000, 20_000, 200_000])(
    'a result nested %i deep is VALIDATION naming the depth',
    async (depth) => {
      const event = await engine.run({ code: `${nest(depth)} return v` });
      const error = expectError(event, 'VALIDATION');
      expect(error.message).toBe('The result is nested deeper than 2000 levels');
      expect(error.details).toEqual({ field: 'result', limit: 2_000 });
      await expectHealthy(engine);
    },
  );

  it.each([2_001, 5_000])(
    'data-request params nested %i deep end the execution with VALIDATION',
    async (depth) => {
      const event = await engine.run({
        code: `${nest(depth)} try { await dataProxy.request(v) } catch {} return 'went on'`,
      });
      const error = expectError(event, 'VALIDATION');
      expect(error.message).toBe('dataProxy.request params are nested deeper than 2000 levels');
      expect(error.details).toEqual({ field: 'params', limit: 2_000 });
      await expectHealthy(engine);
    },
  );

  it('drops status data nested too deep and keeps the message', async () => {
    const events: unknown[] = [];
    const handle = engine.submit({ code: `${nest(5_000)} reportStatus('deep', v); return 1` });
    for await (const event of handle) events.push(event);
    expect(events[0]).toEqual({
      type: 'status',
      source: 'reportStatus',
      level: 'info',
      message: 'deep',
    });
  });
});

describe('in-process mode', () => {
  const inProcess = new SandboxEngine({
    isolation: 'in-process',
    limits: { timeoutMs: 5_000 },
    dataHandler: (params) => params,
  });
  afterAll(() => inProcess.dispose());

  it('keeps the returned value over a stray rejection, before and after a data request', async () => {
    const returned = await inProcess.run({ code: "Promise.reject(new Error('x')); return 1" });
    expect(expectResult(returned).payload).toBe(1);
    const running = await inProcess.run({
      code: "Promise.reject(new Error('x')); await dataProxy.request(1); return 2",
    });
    expect(expectResult(running).payload).toBe(2);
    await expectHealthy(inProcess);
  });

  it('refuses a result nested too deep with VALIDATION', async () => {
    const event = await inProcess.run({
      code: 'let v = 1; for (let i = 0; i < 5000; i++) v = [v]; return v',
    });
    expect(expectError(event, 'VALIDATION').details).toEqual({ field: 'result', limit: 2_000 });
  });
});

describe('cancel', () => {
  it('delivers CANCELLED before the slot is free, and frees it once the worker confirms', async () => {
    const single = new SandboxEngine({
      workers: 1,
      maxConcurrent: 1,
      limits: { timeoutMs: 20_000 },
    });
    try {
      const handle = single.submit({ code: 'reportStatus("go"); while (true) {}' });
      for await (const event of handle) if (event.type === 'status') break;
      handle.cancel('stop');
      expect(await handle.result).toMatchObject({ code: 'CANCELLED' });
      const deadline = Date.now() + 5_000;
      while (single.stats().active > 0 && Date.now() < deadline) {
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
      expect(single.stats().active).toBe(0);
      expect(expectResult(await single.run({ code: 'return 1' })).payload).toBe(1);
    } finally {
      await single.dispose();
    }
  });
});
