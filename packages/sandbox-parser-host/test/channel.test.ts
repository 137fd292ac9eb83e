// The response channel: nothing the parser prints or writes can fake or corrupt a result, both
// directions are size-capped, and what cannot be JSON is an error, not a crash.
import { fileURLToPath } from 'node:url';
import type { JsonObject } from '@coda/sandbox-core';
import { describe, expect, it } from 'vitest';
import { makeHost } from './helpers.ts';

describe('the response channel', () => {
  it('console output reaches result.stderr, not the result', async () => {
    const host = makeHost();
    const result = await host.runParser('chatty', { n: 1 });
    expect(result).toMatchObject({ ok: true, data: { n: 1 }, exitCode: 0 });
    expect(result.stderr).toContain('a log line from the parser\n');
    expect(result.stderr).toContain('an error line from the parser\n');
    expect(result.stderr).toContain('{"ok":true,"data":"forged on stdout"}');
  });

  it('a forged frame and garbage on fd 3 neither fake nor corrupt the genuine result', async () => {
    const host = makeHost();
    const result = await host.runParser('forgeResponse', null);
    expect(result).toMatchObject({ ok: true, data: 'genuine', exitCode: 0 });
  });

  it('a parser that closes fd 3 gets no result through; one that reads stdin finds it empty', async () => {
    const host = makeHost({ maxConcurrent: 2 });
    const [closed, stdin] = await Promise.all([
      host.runParser('closeChannel', null),
      host.runParser('readStdin', null),
    ]);
    expect(closed).toMatchObject({ ok: false, code: 'CRASH', exitCode: 1 });
    expect(closed.error).toBe('child exited with code 1 without a response');
    expect(stdin).toMatchObject({ ok: true, data: 0 });
  });

  it('a parser that patches JSON, Buffer, fs and process cannot change the framing', async () => {
    const host = makeHost();
    // The runner captured JSON.stringify, fs.writeSync and process.reallyExit before the module
    // loaded and frames with typed-array primitives, so the genuine result still arrives.
    const result = await host.runParser('patchGlobals', null);
    expect(result).toMatchObject({ ok: true, data: 'genuine', exitCode: 0 });
  });

  it.each(['none', 'auto'] as const)(
    'a parser cannot read the nonce through a replaced typed-array getter (%s)',
    async (confinement) => {
      // Our own attack review read the nonce off the 36-byte ready frame this way and forged
      // an error response the host accepted. The runner pins those accessors first.
      const module = fileURLToPath(new URL('./fixtures/nonce-thief.mjs', import.meta.url));
      const host = makeHost({ module, confinement });
      const result = await host.runParser('forge', null);
      expect(result).toMatchObject({
        ok: true,
        data: { redefined: 'refused', sawNonce: false },
        exitCode: 0,
      });
    },
  );

  it('a flood of bytes on fd 3 is cut off at maxOutputBytes', async () => {
    const host = makeHost({ maxOutputBytes: 1024 * 1024 });
    const result = await host.runParser('floodResponse', null);
    expect(result).toMatchObject({
      ok: false,
      code: 'VALIDATION',
      error: 'the response channel carried over 1048576 bytes that were no response',
    });
  });

  it('an oversized result is an error naming both sizes', async () => {
    const host = makeHost({ maxOutputBytes: 1000 });
    const result = await host.runParser('huge', { bytes: 5000 });
    expect(result).toMatchObject({
      ok: false,
      code: 'VALIDATION',
      exitCode: 1,
      error: 'parser result is 5002 bytes, over maxOutputBytes (1000)',
    });
    const fits = await host.runParser('huge', { bytes: 998 });
    expect(fits).toMatchObject({ ok: true, data: 'x'.repeat(998) });
  });

  it('a 4 MiB payload and its result travel intact, with a __proto__ kwarg', async () => {
    const host = makeHost();
    const text = '€'.repeat(1024 * 1024) + 'x'.repeat(1024 * 1024);
    const kwargs = JSON.parse('{"__proto__":{"polluted":true},"mode":"full"}') as JsonObject;
    const result = await host.runParser('echo', { text }, { kwargs });
    expect(result.ok).toBe(true);
    const data = result.data as { payload: { text: string }; kwargs: JsonObject };
    expect(data.payload.text).toBe(text);
    expect(Object.hasOwn(data.kwargs, '__proto__')).toBe(true);
    expect(data.kwargs.mode).toBe('full');
  });

  it('an oversized payload is refused before a child starts', async () => {
    const host = makeHost({ maxPayloadBytes: 100 });
    const result = await host.runParser('echo', { text: 'y'.repeat(200) });
    expect(result).toEqual({
      ok: false,
      code: 'VALIDATION',
      error: 'payload is 213 bytes, over maxPayloadBytes (100)',
      timedOut: false,
      exitCode: null,
      durationMs: 0,
      stderr: '',
    });
  });

  it('results that are not JSON (BigInt, cycles) are errors', async () => {
    const host = makeHost();
    const [big, cyclic] = await Promise.all([
      host.runParser('bigint', null),
      host.runParser('cycle', null),
    ]);
    expect(big).toMatchObject({
      ok: false,
      code: 'VALIDATION',
      exitCode: 1,
      error: 'parser result is not JSON: Do not know how to serialize a BigInt',
    });
    expect(cyclic).toMatchObject({ ok: false, code: 'VALIDATION', exitCode: 1 });
    expect(cyclic.error).toMatch(/^parser result is not JSON: Converting circular structure/);
  });

  it('payloads that are not JSON are refused before a child starts', async () => {
    const host = makeHost();
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    const [big, loop] = await Promise.all([
      host.runParser('echo', { n: 1n }),
      host.runParser('echo', cyclic),
    ]);
    expect(big).toMatchObject({ ok: false, code: 'VALIDATION', exitCode: null });
    expect(big.error).toBe('payload is not JSON: Do not know how to serialize a BigInt');
    expect(loop.error).toMatch(/^payload is not JSON: Converting circular structure/);
  });

  it('a stderr flood is capped in the result and the call still succeeds', async () => {
    const host = makeHost({ maxStderrBytes: 4096 });
    const result = await host.runParser('stderrFlood', null);
    expect(result).toMatchObject({ ok: true, data: 'flooded', exitCode: 0 });
    const [kept, note] = result.stderr.split('\n[');
    expect(Buffer.byteLength(kept ?? '')).toBe(4096);
    expect(note).toMatch(/^\d+ more bytes of output dropped\]$/);
  });

  it('host memory stays flat while children flood every channel', async () => {
    const host = makeHost({ maxOutputBytes: 256 * 1024, maxStderrBytes: 1024, maxConcurrent: 2 });
    const before = process.memoryUsage().rss;
    const results = await Promise.all([
      host.runParser('floodResponse', null),
      host.runParser('stderrFlood', null),
      host.runParser('huge', { bytes: 8 * 1024 * 1024 }),
      host.runParser('floodResponse', null),
    ]);
    expect(results.map((result) => result.ok)).toEqual([false, true, false, false]);
    const grown = process.memoryUsage().rss - before;
    expect(grown).toBeLessThan(48 * 1024 * 1024);
  });
});
