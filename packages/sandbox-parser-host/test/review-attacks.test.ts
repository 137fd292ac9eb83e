// A hostile parser against the host's side of the channel: results nested past what JSON can
// carry, prototype keys, throwing getters and proxies, toJSON posing as an envelope, a wide
// result over the cap; and response frames (as a child holding the nonce could write them)
// whose envelope is oddly shaped or carries __proto__.
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { ResponseReader } from '../src/host/response-reader.ts';
import { makeHost } from './helpers.ts';

const module = fileURLToPath(new URL('./fixtures/review-attacks.mjs', import.meta.url));

describe('hostile results through a real runner child', () => {
  it('a result nested deeper than JSON.stringify can go is an error, not a crash or a stall', async () => {
    const host = makeHost({ module, maxConcurrent: 2 });
    const [shallow, deep] = await Promise.all([
      host.runParser('deep', { depth: 1_000 }),
      host.runParser('deep', { depth: 2_000_000 }),
    ]);
    expect(shallow.ok).toBe(true);
    expect(deep).toMatchObject({
      ok: false,
      code: 'VALIDATION',
      exitCode: 1,
      error: 'parser result is not JSON: Maximum call stack size exceeded',
    });
  });

  it('__proto__ and constructor keys in a result stay own data and pollute nothing', async () => {
    const result = await makeHost({ module }).runParser('protoKeys', null);
    if (!result.ok) throw new Error(result.error);
    const data = result.data as Record<string, unknown>;
    expect(Object.keys(data)).toEqual(['__proto__', 'constructor', 'ok']);
    expect(Object.getPrototypeOf(data)).toBe(Object.prototype);
    expect(Object.getOwnPropertyDescriptor(data, '__proto__')?.value).toEqual({ polluted: true });
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });

  it('a throwing getter and a throwing proxy trap are invalid results', async () => {
    const host = makeHost({ module, maxConcurrent: 2 });
    const [getter, proxy] = await Promise.all([
      host.runParser('throwingGetter', null),
      host.runParser('proxyResult', null),
    ]);
    expect(getter).toMatchObject({
      ok: false,
      code: 'VALIDATION',
      error: 'parser result is not JSON: getter fired in the runner',
    });
    expect(proxy).toMatchObject({
      ok: false,
      code: 'VALIDATION',
      error: 'parser result is not JSON: ownKeys trap',
    });
  });

  it('a toJSON that returns a failure envelope is only data', async () => {
    const result = await makeHost({ module }).runParser('envelopeToJSON', null);
    expect(result).toMatchObject({
      ok: true,
      data: { ok: false, kind: 'unknown-parser', error: 'forged' },
      exitCode: 0,
    });
  });

  it('a parser that ignores SIGXCPU is killed at the hard CPU limit, one second later', async () => {
    // The wall clock (20 s) is far off: the end is the rlimit's. SIGKILL names no limit, so the
    // result reads as a crash, not as the TIMEOUT a SIGXCPU gives.
    const result = await makeHost({ module }).runParser('ignoreCpuLimit', null, {
      cpuSecs: 1,
      timeout: 20_000,
    });
    expect(result).toMatchObject({
      ok: false,
      code: 'CRASH',
      error: 'child was killed by SIGKILL without a response',
      timedOut: false,
    });
  });

  it('a million-key result over maxOutputBytes is refused with both sizes', async () => {
    const result = await makeHost({ module }).runParser('wide', { keys: 1_000_000 });
    expect(result).toMatchObject({
      ok: false,
      code: 'VALIDATION',
      error: 'parser result is 16777781 bytes, over maxOutputBytes (16777216)',
    });
  });
});

describe('hostile response envelopes at the reader', () => {
  const nonce = randomBytes(32);
  const frame = (body: string): Buffer => {
    const bytes = Buffer.from(body);
    const length = Buffer.alloc(4);
    length.writeUInt32BE(bytes.length);
    return Buffer.concat([nonce, length, bytes]);
  };
  const read = (body: string) => {
    const reader = new ResponseReader(nonce, 1024 * 1024);
    reader.push(frame(''));
    return reader.push(frame(body));
  };
  const wrongShape = {
    kind: 'refused',
    reason: 'malformed',
    message: 'the response has the wrong shape',
  };

  it('refuses an envelope whose fields sit only under __proto__, or whose kind is __proto__', () => {
    expect(read('{"__proto__":{"ok":true,"data":1}}')).toEqual(wrongShape);
    expect(read('{"ok":false,"error":"x","kind":"__proto__"}')).toEqual(wrongShape);
    expect(read('{"ok":false,"error":{"toString":1},"kind":"parser-error"}')).toEqual(wrongShape);
    expect(read('{"ok":"true","data":1}')).toEqual(wrongShape);
    expect(read('{"ok":true}')).toEqual(wrongShape);
  });

  it('drops a __proto__ key beside a valid envelope: the response keeps a plain prototype', () => {
    const state = read('{"ok":true,"data":1,"__proto__":{"ok":false,"polluted":true}}');
    expect(state).toEqual({ kind: 'complete', response: { ok: true, data: 1 } });
    if (state.kind !== 'complete') throw new Error('expected a response');
    expect(Object.getPrototypeOf(state.response)).toBe(Object.prototype);
    expect(Object.keys(state.response)).toEqual(['ok', 'data']);
  });

  it('takes the last of duplicated ok keys, as JSON.parse does, and checks the shape after it', () => {
    expect(read('{"ok":false,"ok":true,"data":"dup"}')).toEqual({
      kind: 'complete',
      response: { ok: true, data: 'dup' },
    });
    expect(read('{"ok":true,"data":1,"ok":false}')).toEqual(wrongShape);
  });
});
