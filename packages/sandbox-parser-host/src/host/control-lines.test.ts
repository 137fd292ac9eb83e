import { describe, expect, it } from 'vitest';
import { ControlLines } from './control-lines.ts';

describe('ControlLines', () => {
  it('hands over whole lines as they complete, across pieces', () => {
    const lines: string[] = [];
    const reader = new ControlLines(16, (line) => lines.push(line));
    expect(reader.push('{"a":1}\n{"b"')).toBe(true);
    expect(lines).toEqual(['{"a":1}']);
    expect(reader.push(':2}\n\n{"c":3}\n')).toBe(true);
    expect(lines).toEqual(['{"a":1}', '{"b":2}', '', '{"c":3}']);
  });

  it('refuses an unfinished line longer than its bound, and only then', () => {
    const reader = new ControlLines(4, () => {});
    expect(reader.push('abcd')).toBe(true);
    expect(reader.push('e')).toBe(false);
  });

  it('a long line that ends within one piece is no refusal', () => {
    const lines: string[] = [];
    const reader = new ControlLines(4, (line) => lines.push(line));
    expect(reader.push('abcdefgh\nab')).toBe(true);
    expect(lines).toEqual(['abcdefgh']);
  });
});
