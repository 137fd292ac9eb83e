// OOM is a fact, not a message (issue 23: labels from facts). V8 throws RangeError "Array buffer
// allocation failed" when isolated-vm's allocator refuses a buffer past memoryMb; before this
// test the host labelled any uncaught error with that message OOM, so user code could forge the
// label (a caller that answers OOM with more memory could be led to raise it). Now the bootstrap
// checks the refusal with the allocator itself: forged messages, even thrown from inside an
// allocating builtin, end as the code's own RUNTIME error; real refusals end OOM on every path.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SandboxEngine } from '../src/index.ts';
import { expectError, expectHealthy } from './helpers.ts';

const forgedText = "'Array buffer allocation failed'";

/** User code that throws the allocator's message without a refusal: its own error, exactly. */
const forged: { name: string; code: string; message: string }[] = [
  {
    name: 'a RangeError',
    code: `throw new RangeError(${forgedText})`,
    message: 'RangeError: Array buffer allocation failed',
  },
  {
    name: 'an Error',
    code: `throw new Error(${forgedText})`,
    message: 'Error: Array buffer allocation failed',
  },
  {
    name: 'a plain object',
    code: `throw { message: ${forgedText} }`,
    message: 'Error: Array buffer allocation failed',
  },
  {
    name: 'a rejection after a data request',
    code: `await dataProxy.request({}); await Promise.reject(new RangeError(${forgedText}))`,
    message: 'RangeError: Array buffer allocation failed',
  },
  {
    name: 'a timer callback',
    code: `await new Promise(() => setTimeout(() => { throw new RangeError(${forgedText}) }, 1))`,
    message: 'RangeError: Array buffer allocation failed',
  },
  {
    name: "from ArrayBuffer's length valueOf",
    code: `new ArrayBuffer({ valueOf() { throw new RangeError(${forgedText}) } })`,
    message: 'RangeError: Array buffer allocation failed',
  },
  {
    name: "from a typed array's array-like length getter",
    code: `new Uint8Array({ get length() { throw new RangeError(${forgedText}) } })`,
    message: 'RangeError: Array buffer allocation failed',
  },
  {
    name: "from an element's valueOf, after the buffer was allocated",
    code: `new Float64Array(Array.from({ length: 1000 }, () => ({ valueOf() { throw new RangeError(${forgedText}) } })))`,
    message: 'RangeError: Array buffer allocation failed',
  },
  {
    name: "from a newTarget's prototype getter, inside the constructor",
    code: `Reflect.construct(Uint8Array, [100000], new Proxy(function () {}, { get(t, k) { if (k === 'prototype') throw new RangeError(${forgedText}); return t[k]; } }))`,
    message: 'RangeError: Array buffer allocation failed',
  },
  {
    name: 'a fresh error after a real refusal was caught',
    code: `try { new ArrayBuffer(64e6) } catch {} throw new RangeError(${forgedText})`,
    message: 'RangeError: Array buffer allocation failed',
  },
  // V8's other size messages were never OOM; pinned so that no one maps them by text.
  {
    name: "V8's string length message",
    code: "throw new RangeError('Invalid string length')",
    message: 'RangeError: Invalid string length',
  },
  {
    name: "V8's array length message",
    code: "throw new RangeError('Invalid array length')",
    message: 'RangeError: Invalid array length',
  },
  {
    name: 'a real stack overflow (a limit of depth, not memory)',
    code: 'function f() { return f() + 1 } f()',
    message: 'RangeError: Maximum call stack size exceeded',
  },
];

/** Real refusals of the allocator under memoryMb 32, each on another path: OOM. */
const real: { name: string; code: string }[] = [
  { name: 'new ArrayBuffer over the limit', code: 'new ArrayBuffer(64e6)' },
  { name: 'a typed array over the limit', code: 'return new Float64Array(1e8).length' },
  {
    name: 'buffers kept until the limit',
    code: 'const a = []; for (let i = 0; i < 40; i++) a.push(new ArrayBuffer(16e6)); return a.length',
  },
  {
    name: 'typed arrays copied from a plain array',
    code: 'const a = Array.from({ length: 2e6 }, (_, i) => i + 0.5); const keep = []; for (;;) keep.push(new Float64Array(a));',
  },
  {
    name: "a typed array's slice (species)",
    code: 'const a = new Uint8Array(20e6); const b = a.slice(); return b.length',
  },
  { name: "a typed array's toReversed", code: 'return new Uint8Array(20e6).toReversed().length' },
  { name: "an ArrayBuffer's slice", code: 'return new ArrayBuffer(20e6).slice(0).byteLength' },
  {
    name: "an ArrayBuffer's transferToFixedLength",
    code: 'return new ArrayBuffer(1e6).transferToFixedLength(64e6).byteLength',
  },
  {
    name: 'a subclass',
    code: 'class Big extends Uint8Array {} return new Big(64e6).length',
  },
  {
    name: 'caught and rethrown as it is',
    code: 'try { new ArrayBuffer(64e6) } catch (error) { throw error }',
  },
  {
    name: 'after a data request',
    code: 'await dataProxy.request({}); new ArrayBuffer(64e6)',
  },
  {
    name: 'in a timer callback',
    code: 'await new Promise(() => setTimeout(() => { new ArrayBuffer(64e6) }, 1))',
  },
];

describe.each(['process', 'in-process'] as const)('OOM labels from facts (%s)', (isolation) => {
  const engine = new SandboxEngine({
    isolation,
    workers: 1,
    limits: { memoryMb: 32, timeoutMs: 2_000 },
    dataHandler: () => 1,
  });
  beforeAll(() => engine.ready(), 60_000);
  afterAll(() => engine.dispose());

  it.each(forged)('forged, $name: the code’s own RUNTIME error', async ({ code, message }) => {
    const error = expectError(await engine.run({ code }), 'RUNTIME');
    expect(error.message).toBe(message);
  });

  it.each(real)('real, $name: OOM', async ({ code }) => {
    const error = expectError(await engine.run({ code }), 'OOM');
    expect(error.message).toBe('Execution exceeded its memory limit of 32 MiB');
    expect(error.details).toEqual({ memoryMb: 32 });
  });

  it('the engine still serves', async () => {
    await expectHealthy(engine);
  });
});
