// What user code can make the host do per tool call is bounded: zod runs on at most 10 000 input
// values (more is refused before it runs), it lists issues only for inputs of up to 100 values,
// and the message names at most 10 of them. Under the
// worst inputs found — every element wrong, for an array of integers and for a union of objects,
// at the bound and at 100 000 — the host's event loop stays within 50 ms at p99 while the calls
// run, in process mode. Real workers, the real event-loop delay histogram.
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { afterAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { SandboxEngine } from '../src/index.ts';
import { expectError } from './helpers.ts';

const engine = new SandboxEngine({
  tools: {
    sum: { input: z.array(z.number().int()), handler: () => 1 },
    route: {
      input: z.array(
        z.union([
          z.object({ kind: z.literal('a'), at: z.number() }),
          z.object({ kind: z.literal('b'), at: z.string().regex(/^[a-z]+$/) }),
          z.object({ kind: z.literal('c'), at: z.array(z.number()).min(2) }),
        ]),
      ),
      handler: () => 1,
    },
  },
});
afterAll(() => engine.dispose());

/** A loop of wrong calls: each rejects in user code (caught), until the time is up. */
const flood = (call: string) =>
  `const until = Date.now() + 1500; let calls = 0;
   while (Date.now() < until) { try { await ${call}; } catch { calls++; } }
   return calls`;

describe('host-side tool input validation is bounded', () => {
  it('refuses an input of more than 10 000 values for a tool with a schema, before zod runs', async () => {
    const event = expectError(
      await engine.run({ code: `await tools.sum(Array(10_001).fill('x'))` }),
      'LIMIT_EXCEEDED',
    );
    expect(event.details).toEqual({ field: 'toolInputValues', limit: 10_000, size: 10_001 });
  });

  it('names at most 10 issues and counts the rest', async () => {
    const event = await engine.run({
      code: `try { await tools.sum(Array(50).fill('x')); } catch (error) { return error.message; }`,
      limits: { maxDataRequests: 1 },
    });
    expect(event.type).toBe('result');
    const message = (event as { payload: string }).payload;
    expect(message.match(/expected number/g)).toHaveLength(10);
    expect(message.endsWith('; and 40 more')).toBe(true);
  });

  it.each([
    ['an array of integers, 9 999 strings', `tools.sum(Array(9_999).fill('x'))`],
    [
      'a union of objects, 3 333 matching no branch',
      `tools.route(Array(3_333).fill({ kind: 'd', at: 1 }))`,
    ],
    [
      'a union of objects, 1 900 valid and the last matching no branch',
      `tools.route([...Array(1_600).fill({ kind: 'c', at: [1, 2] }), ...Array(300).fill({ kind: 'a', at: 1 }), { kind: 'd', at: 1 }])`,
    ],
    ['an array of integers, 99 strings (issues listed)', `tools.sum(Array(99).fill('x'))`],
  ])('keeps the host event loop within 50 ms p99 under %s per call', async (_what, call) => {
    await engine.ready();
    const delay = monitorEventLoopDelay({ resolution: 5 });
    delay.enable();
    const events = [
      await engine.run({
        code: flood(call),
        limits: { maxDataRequests: 1_000_000, timeoutMs: 10_000 },
      }),
    ];
    delay.disable();
    for (const event of events) {
      expect(event.type).toBe('result');
      // The host really validated: each call was refused there.
      expect((event as { payload: number }).payload).toBeGreaterThan(3);
    }
    expect(delay.percentile(99) / 1e6).toBeLessThanOrEqual(50);
  });
});
