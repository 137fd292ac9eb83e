import { describe, expect, it } from 'vitest';
import { capText, parseUntrustedJson, scrubHostPaths } from './safe-json.ts';

describe('parseUntrustedJson', () => {
  it('drops __proto__ keys at every depth and keeps everything else', () => {
    const value = parseUntrustedJson(
      '{"__proto__":{"x":1},"a":[{"__proto__":{"y":2},"b":1}],"constructor":{"prototype":{"z":3}}}',
    );
    expect(value).toEqual({ a: [{ b: 1 }], constructor: { prototype: { z: 3 } } });
    const merged = Object.assign({}, value);
    expect((merged as { x?: unknown }).x).toBeUndefined();
    expect(({} as { z?: unknown }).z).toBeUndefined();
  });

  it('drops a __proto__ key spelled with unicode escapes', () => {
    const value = parseUntrustedJson('{"\\u005f_proto__":{"x":1},"ok":true}') as object;
    expect(value).toEqual({ ok: true });
    expect(Object.hasOwn(value, '__proto__')).toBe(false);
  });
});

describe('scrubHostPaths', () => {
  it.each([
    ['ENOENT: open /srv/app/secrets/config.json', 'ENOENT: open <host>'],
    ['at load (file:///work/main/src/x.ts:3:9)', 'at load (<host>:3:9)'],
    ['C:\\Users\\me\\app\\index.js failed', '<host> failed'],
    ['see https://example.com/a/b/c and /tmp', 'see https://example.com/a/b/c and /tmp'],
  ])('%s', (input, expected) => {
    expect(scrubHostPaths(input)).toBe(expected);
  });
});

describe('capText', () => {
  it('cuts long text and marks the cut', () => {
    expect(capText('abcdef', 3)).toBe('abc…');
    expect(capText('abc', 3)).toBe('abc');
  });
});

describe('parseUntrustedJson on deep input', () => {
  it('parses 200 000 levels, with and without __proto__ keys, without recursion', () => {
    const depth = 200_000;
    const plain = parseUntrustedJson(`${'['.repeat(depth)}1${']'.repeat(depth)}`);
    const keyed = parseUntrustedJson(
      `${'{"__proto__":1,"a":'.repeat(depth)}1${'}'.repeat(depth)}`,
    ) as Record<string, unknown>;
    let node: unknown = keyed;
    let levels = 0;
    while (typeof node === 'object' && node !== null) {
      expect(Object.keys(node)).toEqual(['a']);
      node = (node as { a: unknown }).a;
      levels++;
    }
    expect([levels, node]).toEqual([depth, 1]);
    expect(Array.isArray(plain)).toBe(true);
  });
});
