// Property-based fuzzing of the bridge: arbitrary JSON-ish values (deep, wide, unicode, numbers
// at the edges, `__proto__` keys) go from user code to the host through `dataProxy.request`,
// back into the isolate, and out again as the result. Every run must end in a result equal to
// the value (as JSON carries it) or a VALIDATION error, never a host exception or another code.
import { type JsonValue, utf8ByteLength } from '@coda/sandbox-core';
import { SandboxEngine } from '@coda/sandbox-isolate';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/** Fixed in CI so a failure replays; the long soak explores more. */
const seed = 20_261_130;
const numRuns = process.env.SOAK === 'long' ? 5_000 : 500;

const edgeNumbers = fc.constantFrom(
  0,
  -0,
  1,
  -1,
  Number.MAX_VALUE,
  -Number.MAX_VALUE,
  Number.MIN_VALUE,
  Number.MAX_SAFE_INTEGER,
  Number.MIN_SAFE_INTEGER,
  2 ** 53 + 2,
  1e21,
  1e-7,
  0.1 + 0.2,
  Number.NaN,
  Number.POSITIVE_INFINITY,
  Number.NEGATIVE_INFINITY,
);

const text = fc.oneof(
  fc.string({ unit: 'binary', maxLength: 40 }),
  fc.string({ unit: 'grapheme', maxLength: 40 }),
  // Lone surrogates, NUL, line separators, a BOM, escapes.
  fc.constantFrom(
    '\ud800',
    'a\udfff',
    '\ud83d',
    '\u0000',
    '\u2028\u2029',
    '\ufeff',
    '\\"</script>',
  ),
);

const key = fc.oneof(
  { weight: 3, arbitrary: text },
  { weight: 1, arbitrary: fc.constantFrom('__proto__', 'constructor', 'prototype', 'toJSON', '') },
);

const { value } = fc.letrec<{ value: unknown }>((tie) => ({
  value: fc.oneof(
    { maxDepth: 6, depthIdentifier: 'bridge' },
    fc.constant(null),
    fc.boolean(),
    edgeNumbers,
    fc.double(),
    fc.integer(),
    text,
    fc.array(tie('value'), { maxLength: 6, depthIdentifier: 'bridge' }),
    // Object.fromEntries defines `__proto__` as an own key, as JSON.parse does.
    fc
      .array(fc.tuple(key, tie('value')), { maxLength: 6, depthIdentifier: 'bridge' })
      .map((entries) => Object.fromEntries(entries)),
  ),
}));

/**
 * A value nested `depth` levels deep in arrays and objects, alternating. Capped at 1 000 levels:
 * fast-check cannot print deeper values; the test below covers the engine’s 2 000-level limit.
 */
const deep = fc.tuple(fc.integer({ min: 50, max: 1_000 }), value).map(([depth, leaf]) => {
  let nested: unknown = leaf;
  for (let i = 0; i < depth; i++) nested = i % 2 === 0 ? [nested] : { [`k${i}`]: nested };
  return nested;
});

/** A wide array or object. */
const wide = fc.oneof(
  fc.array(fc.oneof(fc.integer(), text, edgeNumbers), { minLength: 500, maxLength: 3_000 }),
  fc
    .uniqueArray(fc.tuple(text, fc.integer()), {
      minLength: 200,
      maxLength: 1_000,
      selector: ([name]) => name,
    })
    .map((entries) => Object.fromEntries(entries)),
);

const anyValue = fc.oneof({ weight: 6, arbitrary: value }, deep, wide);

/** What JSON carries of `input`, without `__proto__` keys (the host drops them on arrival). */
function asJson(input: unknown): JsonValue {
  return JSON.parse(JSON.stringify(input) ?? 'null', (name, item) =>
    name === '__proto__' ? undefined : item,
  ) as JsonValue;
}

const received: JsonValue[] = [];
const engine = new SandboxEngine({
  workers: 1,
  limits: { timeoutMs: 10_000 },
  dataHandler: (params) => {
    received.push(params);
    return params;
  },
});
beforeAll(() => engine.ready());
afterAll(() => engine.dispose());

describe('bridge property', () => {
  it('any JSON-ish value round-trips through dataProxy.request and the result, or is refused with VALIDATION', async () => {
    let runs = 0;
    const outcomes = { result: 0, VALIDATION: 0 };
    const prototypeKeys = Object.getOwnPropertyNames(Object.prototype).sort();
    await fc.assert(
      fc.asyncProperty(
        anyValue,
        fc.option(fc.integer({ min: 2, max: 4_096 }), { nil: undefined }),
        async (input, maxResultBytes) => {
          runs++;
          received.length = 0;
          // The value travels into the isolate as text: an object literal would turn a
          // `__proto__` key into a prototype before the bridge ever saw it.
          const literal = JSON.stringify(JSON.stringify(input) ?? 'null');
          const event = await engine.run({
            code: `return await dataProxy.request(JSON.parse(${literal}))`,
            ...(maxResultBytes === undefined ? {} : { limits: { maxResultBytes } }),
          });
          const expected = asJson(input);
          expect(received).toEqual([expected]);
          if (event.type === 'result') {
            outcomes.result++;
            expect(event.payload).toEqual(expected);
            expect(event.stats.resultBytes).toBe(utf8ByteLength(JSON.stringify(expected)));
            expect(event.stats.resultBytes).toBeLessThanOrEqual(maxResultBytes ?? 5_242_880);
          } else {
            expect(event.code, event.message).toBe('VALIDATION');
            outcomes.VALIDATION++;
            expect(event.details).toMatchObject({ field: 'maxResultBytes', limit: maxResultBytes });
            expect(event.details?.size).toBeGreaterThan(maxResultBytes ?? 0);
          }
          // Nothing reached a prototype of the host.
          expect(Object.getOwnPropertyNames(Object.prototype).sort()).toEqual(prototypeKeys);
        },
      ),
      { seed, numRuns, endOnFailure: true },
    );
    console.log(
      `bridge property: ${runs} runs passed (seed ${seed}): ${outcomes.result} results, ${outcomes.VALIDATION} VALIDATION`,
    );
    expect(runs).toBe(numRuns);
    // Both outcomes were exercised.
    expect(outcomes.result).toBeGreaterThan(0);
    expect(outcomes.VALIDATION).toBeGreaterThan(0);
  }, 240_000);

  it.each([
    ['a result', 'return nest(2_001)', 'result'],
    ['data-request params', 'return await dataProxy.request(nest(2_001))', 'params'],
    ['a result far past the limit', 'return nest(200_000)', 'result'],
  ])(
    '%s nested past 2 000 levels ends in VALIDATION naming the depth limit',
    async (_what, body, field) => {
      received.length = 0;
      const event = await engine.run({
        code: `function nest(depth) { let v = 0; for (let i = 0; i < depth; i++) v = [v]; return v; }
             ${body}`,
      });
      expect(event).toMatchObject({
        type: 'error',
        code: 'VALIDATION',
        details: { field, limit: 2_000 },
      });
      expect(received).toEqual([]);
      // The engine goes on serving.
      expect(await engine.run({ code: 'return 1' })).toMatchObject({ type: 'result', payload: 1 });
    },
  );
});
