// The issue 23 attack review: the isolate's trust boundary as issue 23 left it, attacked with what
// the world has published (vm2's advisories 2023–2026, isolated-vm's issues, secure-exec and
// SES/hardened-JS techniques) and their variants. Each row asserts the exact safe outcome; the
// rows that broke before this review name the break. Real isolates, real workers, both modes.
import type { TerminalEvent } from '@coda/sandbox-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SandboxEngine } from '../src/index.ts';
import { expectError, expectHealthy, expectResult, workerDeathLog } from './helpers.ts';

const modes = ['process', 'in-process'] as const;
const loop = 'for (;;) {}';
/** Short, so the rows that end at their limit cost little: the bound past it is what matters. */
const timeoutMs = 250;

/** A benign co-tenant with an exact result, submitted beside every attack. */
const coTenant = { code: 'let s = 0; for (let k = 0; k < 1e6; k++) s += k % 3; return s' };
const coTenantSum = (() => {
  let s = 0;
  for (let k = 0; k < 1e6; k++) s += k % 3;
  return s;
})();

/**
 * User code that runs inside the copy of a value, a stack formatting or a promise resolution:
 * each must end TIMEOUT within timeoutMs + 1 s, in the isolate, with the worker kept.
 * Sources: vm2 CVE-2023-29017 / 37466 / 2026-22709 (prepareStackTrace, Promise species and
 * handlers), CVE-2026-45411 (async generators), isolated-vm issues on copies of proxies and errors.
 */
const underTheClock: { name: string; code: string }[] = [
  {
    name: 'a looping Error.prepareStackTrace',
    code: `Error.prepareStackTrace = () => { ${loop} }; throw new Error('x')`,
  },
  {
    name: 'a looping prepareStackTrace after a tool call',
    code: `await tools.lookup(); Error.prepareStackTrace = () => { ${loop} }; throw new Error('x')`,
  },
  { name: 'a thrown proxy whose get loops', code: `throw new Proxy({}, { get() { ${loop} } })` },
  {
    name: 'a thrown proxy after a data request',
    code: `await dataProxy.request({}); throw new Proxy({}, { get() { ${loop} } })`,
  },
  {
    name: 'an error whose stack getter loops',
    code: `await null; const e = new Error('x'); Object.defineProperty(e, 'stack', { get() { ${loop} } }); throw e`,
  },
  { name: 'a result proxy whose get loops', code: `return new Proxy([], { get() { ${loop} } })` },
  {
    name: 'a result proxy whose ownKeys loops, after a tool call',
    code: `await tools.lookup(); return new Proxy({}, { ownKeys() { ${loop} } })`,
  },
  { name: 'a thenable result whose then loops', code: `return { then() { ${loop} } }` },
  {
    name: 'tool input whose ownKeys loops',
    code: `await tools.lookup(new Proxy({}, { ownKeys() { ${loop} } }))`,
  },
  {
    name: 'a timer delay whose valueOf loops',
    code: `setTimeout(() => {}, { valueOf() { ${loop} } })`,
  },
  {
    name: 'console data whose toJSON loops',
    code: `await null; console.log({ toJSON() { ${loop} } })`,
  },
  {
    name: 'status data whose toJSON loops, after a tool call',
    code: `await tools.lookup(); reportStatus('m', { toJSON() { ${loop} } })`,
  },
  { name: 'a microtask loop after a tool call', code: 'await tools.lookup(); for (;;) await null' },
  {
    name: 'a timer callback throwing a looping proxy',
    code: `await new Promise(() => setTimeout(() => { throw new Proxy({}, { get() { ${loop} } }) }, 1))`,
  },
  {
    name: 'an async generator whose body loops',
    code: `const g = (async function* () { ${loop} })(); return await g.next()`,
  },
  {
    name: 'a Promise[Symbol.species] getter that loops',
    code: `Object.defineProperty(Promise, Symbol.species, { get() { ${loop} } }); return await tools.lookup()`,
  },
  {
    name: 'a Promise.prototype.constructor getter that loops',
    code: `Object.defineProperty(Promise.prototype, 'constructor', { get() { ${loop} } }); return await tools.lookup()`,
  },
  {
    name: 'a Promise.prototype.then that loops',
    code: `Promise.prototype.then = function () { ${loop} }; return await tools.lookup()`,
  },
];

describe.each(modes)('no user code outside the clock (%s)', (isolation) => {
  const { logger, deaths } = workerDeathLog();
  const engine = new SandboxEngine({
    isolation,
    workers: 2,
    logger,
    dataHandler: () => 1,
    tools: { lookup: { handler: () => 1 } },
  });
  // Workers start (and pools warm) outside the tests' own time limits: slow on a loaded machine.
  beforeAll(() => engine.ready(), 120_000);
  afterAll(() => engine.dispose());

  it.each(underTheClock)(
    '$name: TIMEOUT within timeoutMs + 1 s, the co-tenant served, the workers kept',
    async ({ code }) => {
      deaths.length = 0;
      const started = performance.now();
      const [attack, benign] = await Promise.all([
        engine.run({ code, limits: { timeoutMs } }).then((event) => ({
          event,
          ms: performance.now() - started,
        })),
        engine.run(coTenant),
      ]);
      expect(expectError(attack.event, 'TIMEOUT').details).toEqual({ timeoutMs });
      expect(attack.ms).toBeLessThan(timeoutMs + 1_000);
      expect(expectResult(benign).payload).toBe(coTenantSum);
      expect(deaths).toEqual([]);
    },
    20_000,
  );
});

/**
 * Data answers copied into an isolate at its memory limit. Before this review a string answer of
 * 1 KiB or more was copied in as an external string, and one that passed isolated-vm's
 * memoryLimit threw a fatal error nothing caught: SIGABRT, the worker and its co-tenants lost
 * (in-process: the host). The heap check before the copy looked at one answer at a time, so
 * answers in flight at once each fit alone and aborted the process together; answers under
 * 256 Ki units were not checked at all.
 */
const answerFloods: {
  name: string;
  fill: number;
  answers: number;
  units: number;
  twoByte: boolean;
}[] = [
  {
    name: '20 answers of 1 M characters into a heap holding 24 MiB',
    fill: 24,
    answers: 20,
    units: 1_000_000,
    twoByte: false,
  },
  {
    name: '60 answers of 262 000 characters (under the old check) into 26 MiB',
    fill: 26,
    answers: 60,
    units: 262_000,
    twoByte: false,
  },
  {
    name: '60 two-byte answers of 100 000 characters into 28 MiB',
    fill: 28,
    answers: 60,
    units: 100_000,
    twoByte: true,
  },
];

/**
 * Ways user code can hide a heap figure isolated-vm writes into the object it makes inside the
 * isolate (a helper's attack on the heap-past-limit check: the object is filled with ordinary
 * assignments, which consult Object.prototype).
 */
const heapFigurePlants: { name: string; plant: string }[] = [
  {
    name: 'plants a setter for used_heap_size',
    plant:
      "Object.defineProperty(Object.prototype, 'used_heap_size', { set() {}, configurable: true })",
  },
  {
    name: 'plants a read-only used_heap_size',
    plant:
      "Object.defineProperty(Object.prototype, 'used_heap_size', { value: 1, writable: false })",
  },
  {
    name: 'plants a setter that forges used_heap_size as 1',
    plant:
      "Object.defineProperty(Object.prototype, 'used_heap_size', { set() { Object.defineProperty(this, 'used_heap_size', { value: 1, enumerable: true }) } })",
  },
  {
    name: 'plants a throwing setter for total_heap_size (set first: the whole read throws)',
    plant: "Object.defineProperty(Object.prototype, 'total_heap_size', { set() { throw 1 } })",
  },
  {
    name: 'plants a throwing setter for does_zap_garbage',
    plant: "Object.defineProperty(Object.prototype, 'does_zap_garbage', { set() { throw 1 } })",
  },
  {
    name: 'plants a setter with __defineSetter__',
    plant: "Object.prototype.__defineSetter__('used_heap_size', function () {})",
  },
];

describe.each(modes)('data answers at the memory limit (%s)', (isolation) => {
  let release: () => void = () => {};
  let gate = Promise.resolve();
  let waiting = 0;
  let expected = 0;
  const { logger, deaths } = workerDeathLog();
  const engine = new SandboxEngine({
    isolation,
    workers: 1,
    maxConcurrent: 16,
    poolSize: 0,
    logger,
    dataHandler: async (params) => {
      const { units, twoByte } = params as { units: number; twoByte: boolean };
      // Every answer is released at once, so all of them are in flight together.
      if (++waiting === expected) release();
      await gate;
      return (twoByte ? '€' : 'x').repeat(units);
    },
  });
  // Workers start (and pools warm) outside the tests' own time limits: slow on a loaded machine.
  beforeAll(() => engine.ready(), 120_000);
  afterAll(() => engine.dispose());

  function arm(count: number) {
    waiting = 0;
    expected = count;
    gate = new Promise((resolve) => {
      release = resolve;
    });
  }

  it.each(answerFloods)(
    '$name: OOM, the worker and a co-tenant kept',
    async ({ fill, answers, units, twoByte }) => {
      deaths.length = 0;
      arm(answers);
      const code = `const keep = []; for (let i = 0; i < ${fill}; i++) keep.push(new Array(131072).fill(i + 0.5));
        const calls = []; for (let i = 0; i < ${answers}; i++) calls.push(dataProxy.request({ units: ${units}, twoByte: ${twoByte} }));
        return [keep.length, (await Promise.all(calls)).length]`;
      const [attack, benign] = await Promise.all([
        engine.run({ code, limits: { memoryMb: 32, timeoutMs: 10_000, maxDataRequests: answers } }),
        engine.run(coTenant),
      ]);
      expect(expectError(attack, 'OOM').details).toEqual({ memoryMb: 32 });
      expect(expectResult(benign).payload).toBe(coTenantSum);
      expect(deaths).toEqual([]);
      await expectHealthy(engine);
    },
    30_000,
  );

  /**
   * 30 MiB kept, then 20 answers of 200 KB in flight at once, under memoryMb 32, `runs` times
   * (after `before`): each run's error code, or the heap of its result.
   */
  async function heldWhileAnswersArrive(runs: number, before = ''): Promise<string[]> {
    const code = `${before}
      const keep = []; for (let i = 0; i < 30; i++) keep.push(new Array(131072).fill(i + 0.5));
      const calls = []; for (let i = 0; i < 20; i++) calls.push(dataProxy.request({ units: 100000, twoByte: true }));
      return (await Promise.all(calls)).length`;
    const codes: string[] = [];
    for (let run = 0; run < runs; run++) {
      arm(20);
      const attack = await engine.run({ code, limits: { memoryMb: 32, timeoutMs: 10_000 } });
      codes.push(
        attack.type === 'error' ? attack.code : `result at ${attack.stats.heapUsedBytes} bytes`,
      );
    }
    return codes;
  }

  it('a heap past its limit as user code returns is OOM, every run (isolated-vm ends it only later)', async () => {
    // The heap passes its limit (35 MiB for memoryMb 32: the limit plus V8's young generation)
    // while the answers are copied in, outside user code. isolated-vm ends such a run from an
    // interrupt that came after the return in about half the runs, which then delivered a result
    // at 40 MB (a CI run: 54 MB). Ten runs: all OOM.
    expect(await heldWhileAnswersArrive(10)).toEqual(Array(10).fill('OOM'));
  }, 60_000);

  it.each(heapFigurePlants)(
    'a heap past its limit is OOM after user code $name (the figure it hides is reserved)',
    async ({ plant }) => {
      // Before the names were reserved, each plant hid the heap figure from the bootstrap and the
      // run ended with a result: 20 of 20 runs in process mode, 9-15 of 20 in-process. Now the
      // plant throws (caught) or is a no-op.
      expect(await heldWhileAnswersArrive(4, `try { ${plant} } catch {}`)).toEqual(
        Array(4).fill('OOM'),
      );
    },
    60_000,
  );

  it('the reserved heap-figure names behave as ordinary properties to user code', async () => {
    const run = await engine.run({
      code: `const o = {}; o.used_heap_size = 5; const f = function () {}; f.heap_size_limit = 6;
        const frozen = Object.freeze({}); frozen.externally_allocated_size = 7;
        Object.prototype.used_heap_size = 8;
        return [o.used_heap_size, Object.keys(o), f.heap_size_limit, frozen.externally_allocated_size === undefined,
          ({}).used_heap_size === undefined, 'used_heap_size' in {}, Object.keys({})]`,
    });
    // A frozen object takes no new property (strict mode would throw; the reserved setter refuses
    // silently), and an assignment on Object.prototype itself changes nothing.
    expect(expectResult(run).payload).toEqual([5, ['used_heap_size'], 6, true, true, true, []]);
  });

  it('answers that fit are delivered, however many crossed before (no false OOM)', async () => {
    arm(1);
    // 40 MB of answers through a 32 MiB isolate, each dropped after use; then 20 at once that fit.
    const sequential = await engine.run({
      code: 'let total = 0; for (let i = 0; i < 40; i++) total += (await dataProxy.request({ units: 1000000, twoByte: false })).length; return total',
      limits: { memoryMb: 32, maxDataRequests: 40 },
    });
    expect(expectResult(sequential).payload).toBe(40_000_000);
    arm(20);
    const together = await engine.run({
      code: 'const calls = []; for (let i = 0; i < 20; i++) calls.push(dataProxy.request({ units: 100000, twoByte: true })); return (await Promise.all(calls)).map((s) => s.length).reduce((a, b) => a + b, 0)',
      limits: { memoryMb: 32 },
    });
    expect(expectResult(together).payload).toBe(2_000_000);
  }, 30_000);
});

/**
 * Heap exhaustion on paths the issue 23 table does not name: inside the bootstrap's encoder (a
 * result, status data, request params), while it describes a thrown value, while user code parses
 * a data answer, in console formatting, in a catch after a timer. Each must be OOM, with the worker
 * kept and a co-tenant served: an isolate the host did not dispose was disposed at its limit.
 */
const heapPaths: { name: string; code: string; limits: Record<string, number> }[] = [
  {
    name: 'the result encoder',
    code: "const a = []; for (let i = 0; i < 2e5; i++) a.push('x'.repeat(100) + i); return a",
    limits: { maxResultBytes: 5e8 },
  },
  {
    name: 'describing a thrown value',
    code: "throw { get message() { const a = []; for (;;) a.push('y'.repeat(1000) + Math.random()); } }",
    limits: {},
  },
  {
    name: 'parsing a data answer of 1.5 M objects',
    code: 'const r = await dataProxy.request({ objects: 1500000 }); return r.length',
    limits: { maxDataBytes: 1e9 },
  },
  {
    name: 'console formatting',
    code: "const a = []; for (let i = 0; i < 2e5; i++) a.push({ k: 'x'.repeat(60) + i }); await null; console.log(a, a, a, a); return 1",
    limits: {},
  },
  {
    name: 'encoding status data after a data request',
    code: "const a = []; for (let i = 0; i < 3e5; i++) a.push('x'.repeat(40) + i); await dataProxy.request({}); reportStatus('m', a); return 1",
    limits: { maxStatusBytes: 5e8 },
  },
  {
    name: 'encoding request params',
    code: "const a = []; for (let i = 0; i < 3e5; i++) a.push('x'.repeat(40) + i); await dataProxy.request(a); return 1",
    limits: { maxRequestBytes: 5e8, maxRequestValues: 1e7, maxDataBytes: 1e9 },
  },
  {
    name: 'a catch after a timer rejected',
    code: "try { await new Promise((_, reject) => setTimeout(() => reject(new Error('t')), 1)); } catch { const a = []; for (;;) a.push('z'.repeat(1000) + Math.random()); }",
    limits: {},
  },
];

describe.each(modes)('heap exhaustion is OOM on further paths (%s)', (isolation) => {
  const { logger, deaths } = workerDeathLog();
  const engine = new SandboxEngine({
    isolation,
    workers: 1,
    maxConcurrent: 16,
    logger,
    dataHandler: (params) => {
      const objects = (params as { objects?: number } | null)?.objects;
      return objects === undefined ? 1 : Array.from({ length: objects }, () => ({}));
    },
  });
  // Workers start (and pools warm) outside the tests' own time limits: slow on a loaded machine.
  beforeAll(() => engine.ready(), 120_000);
  afterAll(() => engine.dispose());

  it.each(heapPaths)(
    '$name: OOM, the worker kept, a co-tenant served',
    async ({ code, limits }) => {
      deaths.length = 0;
      const [attack, benign] = await Promise.all([
        engine.run({ code, limits: { memoryMb: 16, timeoutMs: 10_000, ...limits } }),
        engine.run(coTenant),
      ]);
      expect(expectError(attack, 'OOM').details).toEqual({ memoryMb: 16 });
      expect(expectResult(benign).payload).toBe(coTenantSum);
      expect(deaths).toEqual([]);
    },
    30_000,
  );
});

/**
 * Calls user code makes after it delivered its outcome: a promise chain left running, a timer set
 * before the end, a FinalizationRegistry callback. Before this review, in-process, each such call
 * started its handler (15 per execution of the first row): a side effect for an execution whose
 * outcome was already decided. Every call these snippets make after the end carries `late: true`.
 */
const lateCalls: { name: string; code: string; outcome: string }[] = [
  {
    name: 'a promise chain after return',
    code: '(async () => { for (let i = 0; i < 5; i++) await null; for (let i = 0; i < 10; i++) tools.act({ late: true }).catch(() => {}); })(); return 1',
    outcome: 'result',
  },
  {
    name: 'a promise chain after a throw',
    code: "(async () => { for (let i = 0; i < 5; i++) await null; for (let i = 0; i < 10; i++) tools.act({ late: true }).catch(() => {}); })(); throw new Error('x')",
    outcome: 'RUNTIME',
  },
  {
    name: 'a promise chain after a result over maxResultBytes',
    code: "(async () => { for (let i = 0; i < 5; i++) await null; for (let i = 0; i < 10; i++) tools.act({ late: true }).catch(() => {}); })(); return 'x'.repeat(6e6)",
    outcome: 'VALIDATION',
  },
  {
    name: 'a data request from a chain after return',
    code: '(async () => { for (let i = 0; i < 5; i++) await null; for (let i = 0; i < 10; i++) dataProxy.request({ late: true }).catch(() => {}); })(); return 1',
    outcome: 'result',
  },
  {
    name: 'a timer set before return',
    code: 'setTimeout(() => { for (let i = 0; i < 10; i++) tools.act({ late: true }).catch(() => {}); }, 0); return 1',
    outcome: 'result',
  },
];

describe.each(modes)('nothing starts after the outcome is delivered (%s)', (isolation) => {
  let lateStarts = 0;
  const count = (input: unknown) => {
    if ((input as { late?: boolean } | undefined)?.late === true) lateStarts++;
    return null;
  };
  const engine = new SandboxEngine({
    isolation,
    maxConcurrent: 16,
    dataHandler: count,
    tools: { act: { handler: count } },
  });
  // Workers start (and pools warm) outside the tests' own time limits: slow on a loaded machine.
  beforeAll(() => engine.ready(), 120_000);
  afterAll(() => engine.dispose());

  it.each(lateCalls)(
    '$name: 0 handler starts in 100 trials',
    async ({ code, outcome }) => {
      lateStarts = 0;
      const codes = new Map<string, number>();
      for (let trial = 0; trial < 100; trial++) {
        const event: TerminalEvent = await engine.run({ code });
        const seen = event.type === 'error' ? event.code : 'result';
        codes.set(seen, (codes.get(seen) ?? 0) + 1);
      }
      // Late dispatches get every chance to show up.
      await new Promise((resolve) => setTimeout(resolve, 200));
      expect(Object.fromEntries(codes)).toEqual({ [outcome]: 100 });
      expect(lateStarts).toBe(0);
    },
    60_000,
  );
});

/**
 * Published escape techniques, each asked what it can reach. Every frame a CallSite shows is
 * strict (no function, no receiver); the bridge objects are frozen, own only what they should, and
 * lead to this isolate's own Function constructor, which reaches no Node API.
 */
const callSites =
  'Error.prepareStackTrace = (e, cs) => cs.map((c) => [c.getFunctionName(), typeof c.getThis(), typeof c.getFunction(), String(c.getFileName())]);';
const escapes: { name: string; code: string; payload: unknown }[] = [
  {
    name: 'CallSites of a rejected tool call (vm2 CVE-2023-29017)',
    code: `${callSites} try { await tools.lookup(1) } catch (e) { return e.stack }`,
    payload: [
      ['answerOf', 'undefined', 'undefined', 'sandbox:bootstrap'],
      ['eval', 'undefined', 'undefined', 'undefined'],
    ],
  },
  {
    name: 'CallSites of params refused inside the bridge',
    code: `${callSites} try { await dataProxy.request({ m: new Map() }) } catch (e) { return e.stack }`,
    payload: [
      ['bridgeCall', 'undefined', 'undefined', 'sandbox:bootstrap'],
      ['request', 'undefined', 'undefined', 'sandbox:bootstrap'],
      ['eval', 'undefined', 'undefined', 'undefined'],
      ['run', 'undefined', 'undefined', 'sandbox:bootstrap'],
    ],
  },
  {
    name: "CallSites of setTimeout's refusal of a string callback",
    code: `${callSites} try { setTimeout('x', 1) } catch (e) { return e.stack }`,
    payload: [
      ['setTimeout', 'undefined', 'undefined', 'sandbox:bootstrap'],
      ['eval', 'undefined', 'undefined', 'undefined'],
      ['run', 'undefined', 'undefined', 'sandbox:bootstrap'],
    ],
  },
  {
    name: 'yield* over a bridge promise in an async generator (vm2 CVE-2026-45411)',
    code: 'async function* g() { yield* [tools.lookup(1).catch((e) => e.constructor === Error)]; } const out = []; for await (const v of g()) out.push(v); return out',
    payload: [true],
  },
  {
    name: "a SuppressedError from await using, its errors' constructors (vm2 GHSA-55hx)",
    code: "try { await using a = { async [Symbol.asyncDispose]() { throw await tools.lookup(1).catch((e) => e); } }; throw new Error('body'); } catch (e) { const F = e.error.constructor.constructor; return [e.constructor.name, e.suppressed.message, F('return typeof process')(), F('return typeof require')()]; }",
    payload: ['SuppressedError', 'body', 'undefined', 'undefined'],
  },
  {
    name: '__lookupGetter__ and own names of the bridge objects (vm2 GHSA-grj5)',
    code: "return [typeof dataProxy.__lookupGetter__('request'), Object.getOwnPropertyNames(dataProxy), Object.isFrozen(dataProxy), Object.isFrozen(tools), Object.getPrototypeOf(tools), Object.getOwnPropertyNames(tools)]",
    payload: ['undefined', ['request'], true, true, null, ['lookup']],
  },
  {
    name: 'a Promise species subclass around a bridge call (vm2 CVE-2026-22709)',
    code: 'class Spy extends Promise {} Object.defineProperty(Promise, Symbol.species, { value: Spy }); const p = dataProxy.request({}); return [await p, p instanceof Spy]',
    payload: [1, false],
  },
  {
    name: 'the Function constructor of a bridge function',
    code: "const F = dataProxy.request.constructor; return [F('return typeof process')(), F('return typeof require')(), F('return typeof globalThis.ivm')()]",
    payload: ['undefined', 'undefined', 'undefined'],
  },
  {
    name: 'a then getter on Object.prototype while an answer resolves',
    code: "let reads = 0; Object.defineProperty(Object.prototype, 'then', { get() { reads++; return undefined; }, configurable: true }); const r = await dataProxy.request({}); delete Object.prototype.then; return [r, reads]",
    // The one read is user code's own await of the bridge's promise; the bootstrap reads none.
    payload: [1, 0],
  },
];

describe.each(modes)('published escape techniques reach nothing (%s)', (isolation) => {
  const engine = new SandboxEngine({
    isolation,
    workers: 1,
    dataHandler: () => 1,
    tools: {
      lookup: {
        handler: () => {
          throw new Error('refused');
        },
      },
    },
  });
  // Workers start (and pools warm) outside the tests' own time limits: slow on a loaded machine.
  beforeAll(() => engine.ready(), 120_000);
  afterAll(() => engine.dispose());

  it.each(escapes)('$name', async ({ code, payload }) => {
    expect(expectResult(await engine.run({ code })).payload).toEqual(payload);
  });

  it('leaves nothing for the next execution (Symbol.for, WeakRef, FinalizationRegistry, globals)', async () => {
    const first = await engine.run({
      code: "globalThis[Symbol.for('coda.leak')] = 'set'; globalThis.ref = new WeakRef({}); new FinalizationRegistry(() => {}).register({}, 'x'); Object.prototype.polluted = 1; return 'set'",
    });
    expect(expectResult(first).payload).toBe('set');
    const second = await engine.run({
      code: "return [globalThis[Symbol.for('coda.leak')] ?? 'fresh', typeof globalThis.ref, ({}).polluted ?? 'clean']",
    });
    expect(expectResult(second).payload).toEqual(['fresh', 'undefined', 'clean']);
  });

  it.each([
    ['Script execution timed out.'],
    ['Isolate was disposed during execution due to memory limit'],
    ['Isolate was disposed during execution'],
  ])("a thrown %j is user code's own RUNTIME, not the label it imitates", async (message) => {
    const event = expectError(
      await engine.run({ code: `throw new Error(${JSON.stringify(message)})` }),
      'RUNTIME',
    );
    expect(event.message).toBe(`Error: ${message}`);
  });
});

/**
 * Limits the isolate counts in UTF-16 units (a lower bound) and the host counts in UTF-8 bytes:
 * three-byte characters carry three times what the isolate saw. The host's count decides.
 * Each expected figure is worked out from the JSON that crosses.
 */
describe.each(modes)('limits in UTF-8 bytes, whatever the isolate counted (%s)', (isolation) => {
  let calls = 0;
  const engine = new SandboxEngine({
    isolation,
    workers: 1,
    dataHandler: (params) => {
      calls++;
      const answer = (params as { answer?: number }).answer;
      return answer === undefined ? 1 : '€'.repeat(answer);
    },
  });
  // Workers start (and pools warm) outside the tests' own time limits: slow on a loaded machine.
  beforeAll(() => engine.ready(), 120_000);
  afterAll(() => engine.dispose());

  it('params: the sixth 900 008-byte request passes maxDataBytes (5 000 000) and ends the run', async () => {
    calls = 0;
    const event = expectError(
      await engine.run({
        code: "for (let i = 0; i < 20; i++) { try { await dataProxy.request({ s: '€'.repeat(300000) }) } catch {} } return 'survived'",
        limits: { maxDataBytes: 5_000_000 },
      }),
      'LIMIT_EXCEEDED',
    );
    // {"s":"€…"}: 8 + 3 × 300 000 = 900 008 bytes; 6 of them and the 5 answers `1` before.
    expect(event.details).toEqual({
      field: 'maxDataBytes',
      limit: 5_000_000,
      size: 6 * 900_008 + 5,
    });
    expect(calls).toBe(5);
  });

  it('answers: the sixth 900 002-byte answer passes maxDataBytes and ends the run', async () => {
    calls = 0;
    const event = expectError(
      await engine.run({
        code: "for (let i = 0; i < 20; i++) { try { await dataProxy.request({ answer: 300000 }) } catch {} } return 'survived'",
        limits: { maxDataBytes: 5_000_000 },
      }),
      'LIMIT_EXCEEDED',
    );
    // {"answer":300000} is 17 bytes; "€…" is 2 + 3 × 300 000 = 900 002.
    expect(event.details).toEqual({
      field: 'maxDataBytes',
      limit: 5_000_000,
      size: 6 * (17 + 900_002),
    });
    expect(calls).toBe(6);
  });

  it('status: two 1.2 MB console lines are dropped, a 600 000-byte status goes out', async () => {
    const event = expectResult(
      await engine.run({
        code: "console.log('€'.repeat(400000)); console.log('€'.repeat(400000)); reportStatus('€'.repeat(200000)); return 1",
      }),
    );
    expect(event.stats).toMatchObject({ statusEvents: 1, statusDropped: 2, statusBytes: 600_000 });
  });

  it.each([
    ['three-byte characters', "return '€'.repeat(2e6)", 6_000_002],
    ['characters JSON escapes six-fold', "return '\\u0001'.repeat(1e6)", 6_000_002],
  ])(
    'a result of %s over maxResultBytes is refused with its UTF-8 size',
    async (_name, code, size) => {
      const event = expectError(await engine.run({ code }), 'VALIDATION');
      expect(event.details).toEqual({ field: 'maxResultBytes', limit: 5_242_880, size });
    },
  );

  it('params whose only big part is a key are refused at maxRequestBytes', async () => {
    const event = expectError(
      await engine.run({
        code: "const o = {}; o['k'.repeat(2e6)] = 1; try { await dataProxy.request(o) } catch {} return 'survived'",
      }),
      'LIMIT_EXCEEDED',
    );
    // {"kkk…":1}: 2 000 000 + 5 bytes.
    expect(event.details).toEqual({ field: 'maxRequestBytes', limit: 1_048_576, size: 2_000_005 });
  });
});

/**
 * What a worker death writes to the host's logger: the supervisor logs the worker's last stderr,
 * where V8 prints its out-of-memory report. User function names must not reach it (a model may
 * name a function after what it handles): the supervisor kills the worker as V8 starts the report
 * (`<--- Last few GCs --->`), before the JavaScript stack trace that would name them.
 */
describe('worker deaths log no user data (process)', () => {
  const lines: string[] = [];
  const record = (object: unknown, message?: string) => {
    lines.push(`${message ?? ''} ${JSON.stringify(object)}`);
  };
  const engine = new SandboxEngine({
    workers: 1,
    logger: { debug: record, info: record, warn: record, error: record },
  });
  // Workers start (and pools warm) outside the tests' own time limits: slow on a loaded machine.
  beforeAll(() => engine.ready(), 120_000);
  afterAll(() => engine.dispose());

  it('a heap exhausted in a function named with a marker: OOM, the marker in no log line', async () => {
    const marker = 'attack23Marker';
    const event = await engine.run({
      code: `function ${marker}() { const m = new Map(); let i = 0; while (true) m.set(i++, { i }); } ${marker}()`,
      limits: { memoryMb: 8 },
    });
    expect(expectError(event, 'OOM').details).toEqual({ memoryMb: 8 });
    expect(lines.some((line) => line.includes('sandbox worker process ended'))).toBe(true);
    expect(lines.filter((line) => line.includes(marker))).toEqual([]);
  }, 30_000);
});

/**
 * A bridge call made at the stack limit, retried at every depth while the stack unwinds, so that
 * one attempt runs out of stack part-way through the bootstrap's breach path (after it noted the
 * breach, before it told the host, every later call would be refused silently and user code
 * could return a result). Frames of 0 to 23 arguments shift where each attempt runs out.
 */
describe.each(modes)('a limit breach at the stack limit (%s)', (isolation) => {
  const engine = new SandboxEngine({ isolation, workers: 1, dataHandler: () => 1 });
  // Workers start (and pools warm) outside the tests' own time limits: slow on a loaded machine.
  beforeAll(() => engine.ready(), 120_000);
  afterAll(() => engine.dispose());

  it('ends LIMIT_EXCEEDED at call 21 for every frame size', async () => {
    const outcomes: unknown[] = [];
    for (let count = 0; count < 24; count++) {
      const names = Array.from({ length: count }, (_, index) => `, a${index}`).join('');
      const values = Array.from({ length: count }, (_, index) => `, ${index}`).join('');
      const event = await engine.run({
        code: `for (let i = 0; i < 20; i++) await dataProxy.request({});
          function deep(n${names}) {
            try { deep(n + 1${names}); } catch {}
            try { dataProxy.request({}).catch(() => {}); } catch {}
          }
          deep(0${values});
          try { await dataProxy.request({}); return 'answered'; } catch (e) { return 'refused, and user code went on'; }`,
      });
      outcomes.push(event.type === 'error' ? [event.code, event.details] : event.payload);
    }
    const breach = ['LIMIT_EXCEEDED', { field: 'maxDataRequests', limit: 20, size: 21 }];
    expect(outcomes).toEqual(Array.from({ length: 24 }, () => breach));
  }, 60_000);
});
