// Seed 000's "Security Test Coverage" table, row by row, against the engine as a user installs
// it (its public entry only). Every row is followed by a fresh execution that must succeed.
import { SandboxEngine } from '@coda/sandbox-isolate';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  asError,
  asResult,
  eventsOf,
  expectServing,
  expectTimesOut,
  payloadOf,
  statusesOf,
} from './support/events.ts';

// Seed defaults except the time limit (30 s), shortened so the suite stays in CI's budget.
const engine = new SandboxEngine({ limits: { timeoutMs: 1_000 } });
beforeAll(() => engine.ready());
afterAll(() => engine.dispose());

describe('seed 000: security test coverage', () => {
  it('infinite loop: while(true) {} → error event with code TIMEOUT', async () => {
    await expectTimesOut(engine, 'while(true) {}', 1_000);
  });

  it('isolate crash recovery: crashing executions followed by a fresh one → the engine serves normally', async () => {
    const pidsBefore = engine.stats().workerPids;
    // A throw, a heap blow-up, and a fill V8 cannot interrupt, which takes its worker down.
    asError(await engine.run({ code: 'throw new Error("crash")' }), 'RUNTIME');
    const bomb = await engine.run({
      code: 'const a = []; for (;;) a.push(new Array(1e6));',
      limits: { memoryMb: 8 },
    });
    expect(bomb.type === 'error' ? bomb.code : 'result').toBeOneOf(['OOM', 'TIMEOUT']);
    const fill = await engine.run({
      code: 'Array(1e9).fill(0); return 1',
      limits: { memoryMb: 32, timeoutMs: 1_000 },
    });
    expect(fill.type === 'error' ? fill.code : 'result').toBeOneOf(['OOM', 'TIMEOUT', 'CRASH']);
    await expectServing(engine);
    await engine.ready();
    expect(engine.stats().workerPids).toHaveLength(pidsBefore.length);
    const results = await Promise.all(
      Array.from({ length: 8 }, (_, i) => engine.run({ code: `return ${i} * 2` })),
    );
    expect(results.map((event) => asResult(event).payload)).toEqual([0, 2, 4, 6, 8, 10, 12, 14]);
  });

  it('memory bomb: arrays allocated in a loop with memoryMb 8 → error event with code OOM or TIMEOUT', async () => {
    const event = await engine.run({
      code: 'const a = []; while(true) { a.push(new Array(1_000_000)); }',
      limits: { memoryMb: 8 },
    });
    expect(event.type).toBe('error');
    const code = event.type === 'error' ? event.code : undefined;
    expect(['OOM', 'TIMEOUT']).toContain(code);
    if (code === 'OOM') expect(asError(event, 'OOM').details).toEqual({ memoryMb: 8 });
    await expectServing(engine);
  });

  it.each([
    ['fetch not available', 'return typeof fetch'],
    ['process not available', 'return typeof process'],
    ['require not available', 'return typeof require'],
    ['Function constructor escape', "return new Function('return typeof process')()"],
  ])('%s → result payload is "undefined"', async (_row, code) => {
    expect(await payloadOf(engine, code)).toBe('undefined');
  });

  it('oversized code: a 600 000-byte string (over the 512 KB default) → error event with code VALIDATION', async () => {
    const code = `return "${'x'.repeat(600_000 - 10)}";`;
    expect(Buffer.byteLength(code)).toBe(600_000);
    const event = asError(await engine.run({ code }), 'VALIDATION');
    expect(event.details).toMatchObject({ field: 'maxCodeBytes', limit: 524_288, size: 600_000 });
    // Refused before any V8 work: nothing ran, so nothing was measured.
    expect(event.stats).toBeUndefined();
    await expectServing(engine);
  });

  it('maxResultBytes exceeded: a 10 MB string against the 5 MB limit → error event with code VALIDATION', async () => {
    const event = asError(
      await engine.run({ code: "return 'x'.repeat(10 * 1024 * 1024)" }),
      'VALIDATION',
    );
    expect(event.details).toEqual({
      field: 'maxResultBytes',
      limit: 5 * 1024 * 1024,
      size: 10 * 1024 * 1024 + 2,
    });
    await expectServing(engine);
  });

  it('maxStatusEvents cap: 1 500 reportStatus calls with limit 100 → at most 100 status events, then a result', async () => {
    const events = await eventsOf(
      engine.submit({
        code: 'for (let i = 0; i < 1500; i++) reportStatus("step " + i); return "finished"',
        limits: { maxStatusEvents: 100 },
      }),
    );
    const statuses = statusesOf(events);
    expect(statuses).toHaveLength(100);
    expect(statuses[0]).toMatchObject({ type: 'status', message: 'step 0' });
    expect(events).toHaveLength(101);
    const result = asResult(events.at(-1));
    expect(result.payload).toBe('finished');
    expect(result.stats).toMatchObject({ statusEvents: 100, statusDropped: 1_400 });
  });

  it('console cap: 2 000 console.log calls → at most 1 000 status events, no crash, a result', async () => {
    const events = await eventsOf(
      engine.submit({
        // A status cap above the console cap, so the console cap is what holds.
        code: 'for (let i = 0; i < 2000; i++) console.log("line", i); return "quiet again"',
        limits: { maxStatusEvents: 10_000 },
      }),
    );
    const statuses = statusesOf(events);
    expect(statuses).toHaveLength(1_000);
    expect(statuses.every((event) => event.source === 'console')).toBe(true);
    expect(asResult(events.at(-1)).payload).toBe('quiet again');
    await expectServing(engine);
  });
});
