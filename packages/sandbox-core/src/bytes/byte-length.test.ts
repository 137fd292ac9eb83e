import { describe, expect, it } from 'vitest';
import { jsonByteLength, utf8ByteLength } from './byte-length.ts';

describe('utf8ByteLength', () => {
  it.each([
    ['', 0],
    ['abc', 3],
    ['é', 2],
    ['€', 3],
    ['😀', 4],
    ['a😀é€', 10],
    ['\ud800', 3],
    ['\udc00x', 4],
  ])('counts %j as %i bytes, as Buffer does', (text, bytes) => {
    expect(utf8ByteLength(text)).toBe(bytes);
    expect(utf8ByteLength(text)).toBe(Buffer.byteLength(text, 'utf8'));
  });

  it('differs from string.length for non-ASCII text', () => {
    const text = '€'.repeat(1_000);
    expect(text.length).toBe(1_000);
    expect(utf8ByteLength(text)).toBe(3_000);
  });
});

describe('jsonByteLength', () => {
  it('counts the UTF-8 bytes of the JSON text', () => {
    expect(jsonByteLength({ a: 'é' })).toBe(Buffer.byteLength('{"a":"é"}'));
    expect(jsonByteLength('x'.repeat(10))).toBe(12);
    expect(jsonByteLength(null)).toBe(4);
  });

  it('counts values JSON drops as 0', () => {
    expect(jsonByteLength(undefined)).toBe(0);
    expect(jsonByteLength(() => 1)).toBe(0);
  });

  it('throws as JSON.stringify does on BigInt and cycles', () => {
    const cycle: { self?: unknown } = {};
    cycle.self = cycle;
    expect(() => jsonByteLength(1n)).toThrow(TypeError);
    expect(() => jsonByteLength(cycle)).toThrow(TypeError);
  });
});
