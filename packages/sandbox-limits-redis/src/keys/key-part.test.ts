import { describe, expect, it } from 'vitest';
import { hashTag, keyPart } from './key-part.ts';

describe('keyPart', () => {
  it('keeps short plain identifiers readable', () => {
    expect(keyPart('user-42')).toBe('=user-42');
    expect(keyPart('a.b_c@d')).toBe('=a.b_c@d');
  });

  it('hashes anything with braces, separators, whitespace, unicode or length', () => {
    const hostile = ['{x}', 'a:b', 'a|b', 'line\nbreak', 'é', '😀', 'x'.repeat(65), '\uD800', ''];
    for (const id of hostile) {
      const part = keyPart(id);
      expect(part).toMatch(/^#[A-Za-z0-9_-]{43}$/);
    }
  });

  it('is injective across the two forms and for lone surrogates', () => {
    expect(keyPart('\uD800')).not.toBe(keyPart('\uFFFD'));
    expect(keyPart('\uD800')).not.toBe(keyPart('\uDC00'));
    expect(keyPart('abc')).not.toBe(keyPart('=abc'));
  });

  it('builds a single hash tag with no inner braces', () => {
    const tag = hashTag(keyPart('{a}'), keyPart('b'));
    expect(tag.startsWith('{')).toBe(true);
    expect(tag.indexOf('}')).toBe(tag.length - 1);
  });
});
