// A passed bridge limit ends the execution with its code, whatever user code does afterwards:
// catching the refusal and returning, not awaiting, looping forever. The end comes within
// milliseconds of the breach (the timeout here is 20 s), in both modes. Real isolates.
import { afterAll, describe, expect, it } from 'vitest';
import { SandboxEngine } from '../src/index.ts';
import { expectError, expectHealthy } from './helpers.ts';

/** What user code does once a call was refused: each must still end with the limit. */
const afterwards = {
  'catches and returns': 'try { await CALL; } catch {} return "survived"',
  'does not await and returns': 'CALL.catch(() => {}); return "survived"',
  'catches and loops forever': 'try { await CALL; } catch {} for (;;) {}',
  'does not await and loops forever': 'CALL.catch(() => {}); for (;;) {}',
};

/** Each limit, the call that passes it (after `setup`), and the error it must end with. */
const breaches: {
  limit: string;
  setup: string;
  call: string;
  limits: Record<string, number>;
  code: string;
  details: Record<string, unknown>;
}[] = [
  {
    limit: 'maxDataRequests',
    setup: 'for (let i = 0; i < 3; i++) await dataProxy.request(i);',
    call: 'dataProxy.request(4)',
    limits: { maxDataRequests: 3 },
    code: 'LIMIT_EXCEEDED',
    details: { field: 'maxDataRequests', limit: 3, size: 4 },
  },
  {
    limit: 'maxDataRequests (a tool)',
    setup: 'await tools.echo(1);',
    call: 'tools.echo(2)',
    limits: { maxDataRequests: 1 },
    code: 'LIMIT_EXCEEDED',
    details: { field: 'maxDataRequests', limit: 1, size: 2 },
  },
  {
    limit: 'maxRequestBytes',
    setup: '',
    call: 'dataProxy.request("x".repeat(5000))',
    limits: { maxRequestBytes: 1000 },
    code: 'LIMIT_EXCEEDED',
    details: { field: 'maxRequestBytes', limit: 1000 },
  },
  {
    limit: 'maxRequestValues',
    setup: '',
    call: 'tools.echo(Array(50).fill(1))',
    limits: { maxRequestValues: 10 },
    code: 'LIMIT_EXCEEDED',
    details: { field: 'maxRequestValues', limit: 10, size: 11 },
  },
  {
    limit: 'maxDataBytes',
    setup: 'await dataProxy.request("x".repeat(600));',
    call: 'dataProxy.request("y".repeat(600))',
    limits: { maxDataBytes: 1000 },
    code: 'LIMIT_EXCEEDED',
    details: { field: 'maxDataBytes', limit: 1000 },
  },
  {
    limit: 'the nesting depth',
    setup: 'let deep = 1; for (let i = 0; i < 3000; i++) deep = [deep];',
    call: 'dataProxy.request(deep)',
    limits: {},
    code: 'VALIDATION',
    details: { field: 'params', limit: 2000 },
  },
];

describe.each(['process', 'in-process'] as const)(
  'every bridge limit is final (%s)',
  (isolation) => {
    const engine = new SandboxEngine({
      isolation,
      // Small answers, so maxDataBytes is passed by the second call's params.
      dataHandler: () => 1,
      tools: { echo: { handler: () => 1 } },
    });
    afterAll(() => engine.dispose());

    const cases = breaches.flatMap((breach) =>
      Object.entries(afterwards).map(([what, then]) => ({ ...breach, what, then })),
    );
    it.each(cases)('$limit: user code that $what still ends with it', async (breach) => {
      const code = `${breach.setup} ${breach.then.replace('CALL', breach.call)}`;
      const started = performance.now();
      const event = expectError(
        await engine.run({ code, limits: { timeoutMs: 20_000, ...breach.limits } }),
        breach.code,
      );
      expect(event.details).toMatchObject(breach.details);
      // Milliseconds, not the 20 s timeout: generous for a loaded 2-core machine.
      expect(performance.now() - started).toBeLessThan(2_000);
    });

    it('ends a flood of 300 000 un-awaited calls at call maxDataRequests + 1, at once', async () => {
      const started = performance.now();
      const event = expectError(
        await engine.run({
          code: 'for (let i = 0; i < 300_000; i++) dataProxy.request(i).catch(() => {}); return "r"',
          limits: { timeoutMs: 20_000 },
        }),
        'LIMIT_EXCEEDED',
      );
      expect(event.details).toEqual({ field: 'maxDataRequests', limit: 20, size: 21 });
      expect(performance.now() - started).toBeLessThan(2_000);
      await expectHealthy(engine);
    });
  },
);
