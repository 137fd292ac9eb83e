// No user code outside the clock: a value leaves the isolate only through the bootstrap's own
// encoder, which runs in the isolate under the time limit, never through isolated-vm's copy
// (which read an unhandled rejection's reason outside any timeout, and whose reads a dispose
// stops only once: a proxy whose traps loop held a worker's thread until the host killed the
// worker at timeoutMs + 2 s, and in-process an execution never ended). Every hostile value below,
// in every way user code can hand it over, ends with its exact outcome within timeoutMs + 1 s;
// the worker survives (same pid) and a co-tenant waiting on the host on the same worker finishes
// with its exact result. Real isolates, real workers, both modes.
import type { TerminalEvent } from '@coda/sandbox-core';
import { afterAll, describe, expect, it } from 'vitest';
import { SandboxEngine } from '../src/index.ts';
import { expectError, expectResult, workerDeathLog } from './helpers.ts';

// Short, so the 384 rows (most end at their limit) take about a minute: the bound is what matters.
const timeoutMs = 250;
/** The bound of every terminal event: the time limit plus a second (generous for load). */
const boundMs = timeoutMs + 1_000;
const loop = 'for (;;) {}';

/**
 * How the bootstrap treats a value, by what it does with it: encode it (result, params, tool
 * input, status data), describe it (thrown, rejected, thrown by a timer), print it (console,
 * status message), coerce it to a number (a timer's delay). 'loop' runs user code that never
 * ends, so the execution must end with TIMEOUT.
 */
interface Reading {
  encode:
    | 'loop'
    | { throws: string }
    | { json: unknown }
    | { refused: { suffix: string; what: string } };
  /** `Name: message` of the RUNTIME error when thrown. */
  describe: 'loop' | string;
  print: 'loop' | 'ok';
  coerce: 'loop' | 'ok';
  /** Whether every Error's stack loops once it is set (so does a bridge call's own TypeError). */
  stacksLoop?: true;
}

const refusedError = { refused: { suffix: '', what: 'an Error' } } as const;

/** Hostile values as source, each with how it reads (worked out by hand from the bootstrap). */
const values: Record<string, { source: string } & Reading> = {
  'a proxy whose get trap loops': {
    source: `new Proxy({}, { get() { ${loop} } })`,
    encode: 'loop',
    describe: 'loop',
    print: 'loop',
    coerce: 'loop',
  },
  'a proxy whose getPrototypeOf trap loops': {
    source: `new Proxy({}, { getPrototypeOf() { ${loop} } })`,
    encode: 'loop',
    describe: 'Error: {}',
    print: 'ok',
    coerce: 'ok',
  },
  'a proxy whose ownKeys trap loops': {
    source: `new Proxy({}, { ownKeys() { ${loop} } })`,
    encode: 'loop',
    describe: 'loop',
    print: 'loop',
    coerce: 'ok',
  },
  'a proxy whose every trap loops': {
    source: `new Proxy({}, { get() { ${loop} }, getPrototypeOf() { ${loop} }, ownKeys() { ${loop} },
      has() { ${loop} }, getOwnPropertyDescriptor() { ${loop} } })`,
    encode: 'loop',
    describe: 'loop',
    print: 'loop',
    coerce: 'loop',
  },
  'getters that loop': {
    source: `({ get message() { ${loop} }, get stack() { ${loop} }, get name() { ${loop} } })`,
    encode: 'loop',
    describe: 'loop',
    print: 'loop',
    coerce: 'ok',
  },
  'a getter that throws': {
    source: `({ get message() { throw new Error('boom'); } })`,
    encode: { throws: 'boom' },
    describe: 'Error: [unprintable]',
    print: 'ok',
    coerce: 'ok',
  },
  'a Symbol.toPrimitive that loops': {
    source: `({ [Symbol.toPrimitive]() { ${loop} } })`,
    encode: { json: {} },
    describe: 'Error: {}',
    print: 'ok',
    coerce: 'loop',
  },
  'a function whose toString loops': {
    source: `Object.assign(function f() {}, { toString() { ${loop} } })`,
    encode: { refused: { suffix: '', what: 'a function' } },
    describe: 'loop',
    print: 'loop',
    coerce: 'loop',
  },
  'a valueOf that loops': {
    source: `({ valueOf() { ${loop} } })`,
    encode: { refused: { suffix: '.valueOf', what: 'a function' } },
    describe: 'Error: {}',
    print: 'ok',
    coerce: 'loop',
  },
  'a toJSON that loops': {
    source: `({ toJSON() { ${loop} } })`,
    encode: 'loop',
    describe: 'loop',
    print: 'loop',
    coerce: 'ok',
  },
  'an Error subclass whose message getter loops': {
    source: `new (class LoopingMessage extends Error { get message() { ${loop} } })()`,
    encode: refusedError,
    describe: 'loop',
    print: 'ok',
    coerce: 'loop',
  },
  'an Error whose stack getter loops': {
    source: `Object.defineProperty(new Error('x'), 'stack', { get() { ${loop} } })`,
    encode: refusedError,
    describe: 'loop',
    print: 'ok',
    coerce: 'ok',
  },
  'an Error subclass whose name getter loops': {
    source: `new (class LoopingName extends Error { get name() { ${loop} } })('x')`,
    encode: refusedError,
    describe: 'loop',
    print: 'ok',
    coerce: 'loop',
  },
  'an Error subclass whose cause getter loops': {
    source: `new (class LoopingCause extends Error { get cause() { ${loop} } })('x')`,
    encode: refusedError,
    describe: 'Error: x',
    print: 'ok',
    coerce: 'ok',
  },
  'an Error under an Error.prepareStackTrace that loops': {
    source: `(Error.prepareStackTrace = () => { ${loop} }, new Error('x'))`,
    encode: refusedError,
    describe: 'loop',
    print: 'ok',
    coerce: 'ok',
    stacksLoop: true,
  },
  'a thrown non-Error (a string)': {
    source: `'plain'`,
    encode: { json: 'plain' },
    describe: 'Thrown: plain',
    print: 'ok',
    coerce: 'ok',
  },
};

/** What an execution must end with: an error code and message, or a result. */
type Expected = { code: 'TIMEOUT' } | { code: string; message: string } | { result: unknown };

const timeout = { code: 'TIMEOUT' } as const;
const after = { result: 'after' } as const;
const mustBeJson =
  'cannot be returned (the result must be JSON: plain objects, arrays, strings, finite numbers, booleans, null)';

/** The outcome of a value encoded as a bridge call's argument (`label`, named `name`). */
function sent(reading: Reading, label: string, name: string): Expected {
  const { encode } = reading;
  if (encode === 'loop') return timeout;
  // The call's refusal is a TypeError user code rethrows: describing it reads its stack.
  if (reading.stacksLoop && !('json' in encode)) return timeout;
  if ('throws' in encode) {
    return { code: 'RUNTIME', message: `TypeError: ${label}: ${name} must be JSON-serializable` };
  }
  if ('json' in encode) return { result: encode.json };
  const { suffix, what } = encode.refused;
  return {
    code: 'RUNTIME',
    message: `TypeError: ${label}: ${name}${suffix}: ${what} cannot be sent as JSON`,
  };
}

function thrown(reading: Reading): Expected {
  return reading.describe === 'loop' ? timeout : { code: 'RUNTIME', message: reading.describe };
}

/** Every way user code hands a value `H` over, and what it must end with. */
const channels: Record<
  string,
  { code: (value: string) => string; expect: (reading: Reading) => Expected }
> = {
  returned: {
    code: (value) => `return ${value}`,
    expect: ({ encode }) => {
      if (encode === 'loop') return timeout;
      if ('throws' in encode) {
        return {
          code: 'VALIDATION',
          message: `The result is not JSON-serializable: ${encode.throws}`,
        };
      }
      if ('json' in encode) return { result: encode.json };
      const { suffix, what } = encode.refused;
      return { code: 'VALIDATION', message: `result${suffix}: ${what} ${mustBeJson}` };
    },
  },
  thrown: { code: (value) => `throw ${value}`, expect: thrown },
  'thrown after a data request': {
    code: (value) => `await dataProxy.request('go'); throw ${value}`,
    expect: thrown,
  },
  'a handled rejection': { code: (value) => `await Promise.reject(${value})`, expect: thrown },
  'thrown by a timer callback': {
    code: (value) => `await new Promise(() => setTimeout(() => { throw ${value}; }, 1))`,
    expect: thrown,
  },
  'an unhandled rejection': {
    code: (value) => `Promise.reject(${value}); return 'after'`,
    expect: () => after,
  },
  'an unhandled rejection while waiting on the host': {
    code: (value) =>
      `(async () => { throw ${value}; })(); await dataProxy.request('go'); return 'after'`,
    expect: () => after,
  },
  'data request params': {
    code: (value) => `return await dataProxy.request(${value})`,
    expect: (reading) => sent(reading, 'dataProxy.request', 'params'),
  },
  'tool input': {
    code: (value) => `return await tools.echo(${value})`,
    expect: (reading) => sent(reading, 'tools.echo', 'input'),
  },
  'status data': {
    code: (value) => `reportStatus('m', ${value}); return 'after'`,
    expect: ({ encode }) => (encode === 'loop' ? timeout : after),
  },
  'a console argument': {
    code: (value) => `console.log(${value}); return 'after'`,
    expect: ({ print }) => (print === 'loop' ? timeout : after),
  },
  'a timer delay': {
    code: (value) => `setTimeout(() => {}, ${value}); return 'after'`,
    expect: ({ coerce }) => (coerce === 'loop' ? timeout : after),
  },
};

const rows = Object.entries(values).flatMap(([value, reading]) =>
  Object.entries(channels).map(([channel, { code, expect }]) => ({
    name: `${value}, ${channel}`,
    code: code(reading.source),
    expected: expect(reading),
  })),
);

/** The co-tenant's sum, computed here, independently of any isolate. */
const coTenantSum = (() => {
  let s = 0;
  for (let k = 0; k < 100_000; k++) s += k % 7;
  return s;
})();
const coTenantCode =
  "const held = await dataProxy.request('hold'); let s = 0; for (let k = 0; k < 100000; k++) s += k % 7; return [held, s]";

function expectOutcome(event: TerminalEvent, expected: Expected): void {
  if ('result' in expected) {
    expect(expectResult(event).payload).toEqual(expected.result);
    return;
  }
  const error = expectError(event, expected.code);
  if ('message' in expected) expect(error.message).toBe(expected.message);
  else expect(error.details).toEqual({ timeoutMs });
}

describe.each(['process', 'in-process'] as const)(
  'values leave the isolate only through the encoder (%s)',
  (isolation) => {
    // A co-tenant's 'hold' request waits on the host until the test lets it go.
    let onHold: ((release: (value: string) => void) => void) | undefined;
    const { logger, deaths } = workerDeathLog();
    const engine = new SandboxEngine({
      isolation,
      workers: 1,
      logger,
      limits: { timeoutMs },
      dataHandler: (params) =>
        params === 'hold' ? new Promise((resolve) => onHold?.(resolve)) : params,
      tools: { echo: { handler: (input) => input } },
    });
    afterAll(() => engine.dispose());

    /** Starts a co-tenant; resolves once its data request waits on the host. */
    async function startCoTenant() {
      const reached = new Promise<(value: string) => void>((resolve) => {
        onHold = resolve;
      });
      const event = engine.run({ code: coTenantCode, limits: { timeoutMs: 60_000 } });
      return { event, release: await reached };
    }

    async function runTimed(code: string): Promise<{ event: TerminalEvent; elapsed: number }> {
      const started = performance.now();
      const event = await engine.run({ code });
      return { event, elapsed: performance.now() - started };
    }

    it.each(rows)(
      '$name',
      async ({ code, expected }) => {
        await engine.ready();
        deaths.length = 0;
        // Beside a co-tenant that waits on the host (it would die with a killed worker).
        const coTenant = await startCoTenant();
        const beside = await runTimed(code);
        expectOutcome(beside.event, expected);
        expect(beside.elapsed).toBeLessThan(boundMs);
        coTenant.release('held');
        expect(expectResult(await coTenant.event).payload).toEqual(['held', coTenantSum]);
        if (isolation === 'process') {
          // Alone on an idle worker, where user code starts on the worker's main thread.
          const alone = await runTimed(code);
          expectOutcome(alone.event, expected);
          expect(alone.elapsed).toBeLessThan(boundMs);
        }
        expect(deaths).toEqual([]);
      },
      30_000,
    );
  },
);
