import { describe, expect, it } from 'vitest';
import { measureJson } from './json-measure.ts';

describe('measureJson', () => {
  it('counts values as the isolate encoder does: the value, every element and member', () => {
    expect(measureJson('1', 10, 1)).toBe('');
    expect(measureJson('[]', 10, 1)).toBe('');
    expect(measureJson('[1,2]', 10, 3)).toBe('');
    expect(measureJson('[1,2]', 10, 2)).toBe('values');
    expect(measureJson('{"a":[1,{}],"b":"x,y]"}', 10, 5)).toBe('');
    expect(measureJson('{"a":[1,{}],"b":"x,y]"}', 10, 4)).toBe('values');
  });

  it('measures depth over strings with brackets and escaped quotes', () => {
    expect(measureJson('[[["\\"]]]"]]]', 3, 100)).toBe('');
    expect(measureJson('[[[[]]]]', 3, 100)).toBe('depth');
    expect(measureJson(`${'['.repeat(200_000)}${']'.repeat(200_000)}`, 2_000, 1e9)).toBe('depth');
  });
});
