import { describe, expect, it } from 'vitest';
import { colourEnabled, createStyle } from './style.ts';

describe('colourEnabled', () => {
  it('colours a TTY only, and never when NO_COLOR is set to something', () => {
    expect(colourEnabled({ isTTY: true }, {})).toBe(true);
    expect(colourEnabled({ isTTY: false }, {})).toBe(false);
    expect(colourEnabled({}, {})).toBe(false);
    expect(colourEnabled({ isTTY: true }, { NO_COLOR: '1' })).toBe(false);
    // An empty NO_COLOR does not count (no-color.org).
    expect(colourEnabled({ isTTY: true }, { NO_COLOR: '' })).toBe(true);
  });

  it('styles only when enabled', () => {
    expect(createStyle(false).red('x')).toBe('x');
    expect(createStyle(true).red('x')).toBe('\u001b[31mx\u001b[39m');
  });
});
