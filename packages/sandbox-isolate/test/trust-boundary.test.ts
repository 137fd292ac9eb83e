// The host trusts nothing user code says: delivery cannot be forged by tampering with builtins,
// and a value JSON would change or drop is refused, naming its path. Real isolates in real
// worker processes (the default `process` mode).
import { afterAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { SandboxEngine } from '../src/index.ts';
import { expectError, expectResult } from './helpers.ts';

const engine = new SandboxEngine({
  dataHandler: (params) => ({ echoed: params }),
  tools: { lookup: { input: z.object({ q: z.number() }), handler: (input) => ({ found: input }) } },
});
afterAll(() => engine.dispose());

const payloadOf = async (code: string) => expectResult(await engine.run({ code })).payload;

/** A value nested `levels` deep, built inside the isolate (the forged result). */
const deep = (levels: number) =>
  `(() => { let v = 'x'; for (let i = 0; i < ${levels}; i++) v = [v]; return v; })()`;

// Each snippet tampers with something the bootstrap could have used, substituting a forged value
// (a then that passed the real value on would pass with the protection removed), then returns a
// value; the outcome must be exactly that value. The forged thens below forge only for a caller
// that passes no rejection handler: the bootstrap's answer parser, were it to use them (user
// code's own await passes two handlers and gets the real value).
const tampering: [string, string, unknown][] = [
  [
    'Promise.prototype.then hands the bootstrap a 100 000-deep value',
    `const real = Promise.prototype.then; const forged = ${deep(100_000)};
     Promise.prototype.then = function (ok, fail) { return real.call(this, () => ok(forged), fail); };
     return 'real'`,
    'real',
  ],
  [
    'Promise.prototype.then hands the bootstrap a 100 MB string',
    `const real = Promise.prototype.then; const forged = 'ok\\n0\\n"' + 'x'.repeat(100 * 1024 * 1024) + '"';
     Promise.prototype.then = function (ok, fail) { return real.call(this, () => ok(forged), fail); };
     return 'real'`,
    'real',
  ],
  [
    'Promise.prototype.constructor is a getter returning a fake promise',
    `Object.defineProperty(Promise.prototype, 'constructor', { configurable: true,
       get() { return function Fake(executor) { executor(() => {}, () => {}); this.then = (ok) => ok('forged'); }; } });
     return 'real'`,
    'real',
  ],
  [
    'Promise[Symbol.species] is a fake constructor',
    `Object.defineProperty(Promise, Symbol.species, { configurable: true,
       get() { return function Fake(executor) { executor(() => {}, () => {}); }; } });
     return 'real'`,
    'real',
  ],
  [
    'the returned value is a thenable that resolves with a forged outcome',
    `return { then(ok) { ok('real'); } }`,
    'real',
  ],
  [
    'JSON.stringify and JSON.parse are replaced',
    `JSON.stringify = () => '"forged"'; JSON.parse = () => 'forged'; return { a: [1, 'two'] }`,
    { a: [1, 'two'] },
  ],
  [
    'Array.prototype index setters and push are replaced',
    `for (let i = 0; i < 8; i++) Object.defineProperty(Array.prototype, i, { configurable: true, set() { throw new Error('setter'); }, get() { return 'forged'; } });
     Array.prototype.push = () => { throw new Error('push'); }; Array.prototype.join = () => 'forged';
     return { list: ['a', 'b'] }`,
    { list: ['a', 'b'] },
  ],
  [
    'Object.prototype setters for every field name a frame could use',
    `for (const name of ['parent', 'value', 'keys', 'index', 'length', 'members', 'array', 'reason', 'path', 'what', 'units'])
       Object.defineProperty(Object.prototype, name, { __proto__: null, configurable: true, set() { throw new Error(name); }, get() { return 'forged'; } });
     return { x: { y: [1] } }`,
    { x: { y: [1] } },
  ],
  [
    'Reflect.apply, Function.prototype.call and apply are replaced',
    `Reflect.apply = () => 'forged'; Function.prototype.call = () => 'forged'; Function.prototype.apply = () => 'forged';
     return [1, 2]`,
    [1, 2],
  ],
  [
    'String.prototype methods are replaced',
    `for (const name of ['slice', 'charCodeAt', 'concat', 'toString', 'valueOf']) String.prototype[name] = () => 'forged';
     return 'text'`,
    'text',
  ],
  [
    'Object.keys, getPrototypeOf, defineProperty and Array.isArray are replaced',
    `Object.keys = () => ['forged']; Object.getPrototypeOf = () => null; Object.defineProperty = () => { throw new Error('dp'); };
     Array.isArray = () => false; return { a: 1, b: [2] }`,
    { a: 1, b: [2] },
  ],
  ['Number.isFinite is replaced', `Number.isFinite = () => true; return 3.5`, 3.5],
  [
    'a getter on the result is read exactly once',
    `let reads = 0; return { get n() { return ++reads; } }`,
    { n: 1 },
  ],
  [
    'a data request answer cannot be forged through Promise.prototype.then',
    `const real = Promise.prototype.then;
     Promise.prototype.then = function (ok, fail) {
       return real.call(this, fail === undefined ? () => ok('1"forged"') : ok, fail);
     };
     const answer = await dataProxy.request({ q: 1 }); return answer`,
    { echoed: { q: 1 } },
  ],
  [
    'a tool answer cannot be forged through Promise.prototype.then',
    `const real = Promise.prototype.then;
     Promise.prototype.then = function (ok, fail) {
       return real.call(this, fail === undefined ? () => ok('1"forged"') : ok, fail);
     };
     const answer = await tools.lookup({ q: 1 }); return answer`,
    { found: { q: 1 } },
  ],
  [
    'tools cannot be redefined: the object is frozen and has no prototype to plant on',
    `tools.lookup = () => 'forged'; try { Object.defineProperty(tools, 'lookup', { value: () => 'forged' }); } catch {}
     Object.prototype.lookup = () => 'forged';
     return [await tools.lookup({ q: 2 }), Object.getPrototypeOf(tools)]`,
    [{ found: { q: 2 } }, null],
  ],
  [
    'a tool call still crosses with Array index setters, Reflect.apply and call/apply replaced',
    `for (let i = 0; i < 8; i++) Object.defineProperty(Array.prototype, i, { configurable: true, set() { throw new Error('setter'); }, get() { return 'forged'; } });
     Reflect.apply = () => 'forged'; Function.prototype.call = () => 'forged'; Function.prototype.apply = () => 'forged';
     Object.defineProperty = () => { throw new Error('dp'); }; JSON.parse = () => 'forged';
     return await tools.lookup({ q: 3 })`,
    { found: { q: 3 } },
  ],
  [
    'a refusal of tool input is a fresh Error whose message user code cannot change',
    `Error.prototype.message = 'forged';
     try { await tools.lookup({ q: 'x' }); } catch (error) { return [Object.hasOwn(error, 'message'), error.message]; }`,
    [
      true,
      'Invalid tools.lookup input: q: Invalid input: expected number, received string (got "x")',
    ],
  ],
  [
    'a throwing toJSON on tool input rejects with the bridge’s own TypeError',
    `try { await tools.lookup({ toJSON() { throw new Error('inner'); } }); }
     catch (error) { return [error instanceof TypeError, error.message]; }`,
    [true, 'tools.lookup: input must be JSON-serializable'],
  ],
];

describe('delivery cannot be influenced by user code', () => {
  it.each(tampering)('%s', async (_name, code, expected) => {
    expect(await payloadOf(code)).toEqual(expected);
  });

  it('a forged 100 MB outcome never reaches the host', async () => {
    const before = process.memoryUsage().rss;
    for (let i = 0; i < 3; i++) {
      expect(await payloadOf(tampering[1]![1])).toBe('real');
    }
    expect(process.memoryUsage().rss - before).toBeLessThan(50 * 1024 * 1024);
  });
});

// Every JSON-hostile type, with the path and the words the error names.
const hostile: [string, string, string][] = [
  ['return new Map([[1, 2]])', 'result', 'a Map'],
  ['return { items: [1, 2, 3, new Set()] }', 'result.items[3]', 'a Set'],
  ['return () => 1', 'result', 'a function'],
  ['return { f() {} }', 'result.f', 'a function'],
  ['return NaN', 'result', 'NaN'],
  ['return [Infinity]', 'result[0]', 'Infinity'],
  ['return { low: -Infinity }', 'result.low', '-Infinity'],
  ['return { big: 10n }', 'result.big', 'a BigInt'],
  ['return [Symbol("s")]', 'result[0]', 'a symbol'],
  ['return [1, undefined]', 'result[1]', 'undefined'],
  ['return new Uint8Array(4)', 'result', 'a typed array or DataView'],
  ['return new DataView(new ArrayBuffer(1))', 'result', 'a typed array or DataView'],
  ['return { buffer: new ArrayBuffer(8) }', 'result.buffer', 'an ArrayBuffer'],
  ['return /x/', 'result', 'a RegExp'],
  ['return new WeakMap()', 'result', 'a WeakMap'],
  ['return new WeakSet()', 'result', 'a WeakSet'],
  [
    'class Point { constructor() { this.x = 1; } } return new Point()',
    'result',
    'an instance of Point',
  ],
  ['return { p: Promise.resolve(1) }', 'result.p', 'an instance of Promise'],
  ['return new Number(1)', 'result', 'an instance of Number'],
  ['const a = { list: [] }; a.list.push(a); return a', 'result.list[0]', 'a circular reference'],
  ['return { "a-b": new Map() }', 'result["a-b"]', 'a Map'],
];

describe('results cross faithfully or not at all', () => {
  it.each(hostile)('%s → VALIDATION naming %s', async (code, path, what) => {
    const error = expectError(await engine.run({ code }), 'VALIDATION');
    expect(error.message).toBe(
      `${path}: ${what} cannot be returned (the result must be JSON: plain objects, arrays, strings, finite numbers, booleans, null)`,
    );
    expect(error.details).toEqual({ field: path, what });
  });

  it('keeps what JSON keeps: toJSON (Date), null prototypes, members that are undefined', async () => {
    expect(
      await payloadOf(`const o = Object.create(null); o.k = 1;
        return { when: new Date(0), o, gone: undefined, nested: [{ a: null }] }`),
    ).toEqual({ when: '1970-01-01T00:00:00.000Z', o: { k: 1 }, nested: [{ a: null }] });
    expect(await payloadOf('return undefined')).toBeNull();
  });

  it('names the path of params a data request cannot send, inside the isolate', async () => {
    expect(
      await payloadOf(
        `try { await dataProxy.request({ filter: new Map() }); } catch (e) { return e.message; }`,
      ),
    ).toBe('dataProxy.request: params.filter: a Map cannot be sent as JSON');
  });

  it('stops at once when a result passes maxResultBytes (20 MB refused fast)', async () => {
    const started = performance.now();
    const typed = await engine.run({ code: 'return new Uint8Array(20e6)' });
    expect(expectError(typed, 'VALIDATION').details).toMatchObject({ field: 'result' });
    // 3 million strings: 27 MB of JSON, of which the encoder writes 5 MB before it stops.
    const array = await engine.run({ code: 'return new Array(3e6).fill("seven")' });
    expect(expectError(array, 'VALIDATION').details).toMatchObject({
      field: 'maxResultBytes',
      limit: 5_242_880,
    });
    // Building the array itself takes most of this; encoding stops after 5 MB of text.
    expect(performance.now() - started).toBeLessThan(3_000);
  });
});

describe('code left running after delivery cannot stall a thread', () => {
  // Our own attack review: a promise chain that ends in a loop, resumed after a data request, ran
  // in a task V8's timeout does not cover; the heap figure taken after delivery waited for the
  // isolate's lock forever (in-process mode: the host's own thread).
  const lingering =
    'await dataProxy.request(1); Promise.resolve().then(() => 0).then(() => 0).then(() => { for (;;); }); return 5';

  it.each(['process', 'in-process'] as const)(
    '%s: the result arrives, and a co-tenant finishes',
    async (isolation) => {
      const engine = new SandboxEngine({ isolation, workers: 1, dataHandler: () => 'ok' });
      try {
        await engine.ready();
        const started = performance.now();
        const benign = engine.run({
          code: 'let s = 0; for (let i = 0; i < 1e7; i++) s += i; return s',
        });
        const attack = await engine.run({ code: lingering, limits: { timeoutMs: 1_000 } });
        expect(expectResult(attack).payload).toBe(5);
        expect(expectResult(await benign).payload).toBe(49_999_995_000_000);
        expect(performance.now() - started).toBeLessThan(900);
        expect(expectResult(await engine.run({ code: 'return "next"' })).payload).toBe('next');
      } finally {
        await engine.dispose();
      }
    },
  );
});
