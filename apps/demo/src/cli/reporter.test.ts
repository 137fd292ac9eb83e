import { describe, expect, it } from 'vitest';
import { captureStream } from '../../test/helpers/captured-stream.ts';
import { createTerminalReporter } from './reporter.ts';
import { createStyle } from './style.ts';

describe('createTerminalReporter', () => {
  it('prints only the result lines when stdout is not a terminal', () => {
    const out = captureStream(false);
    const reporter = createTerminalReporter(out.stream, createStyle(false));
    reporter.progress('  parse(sample)…');
    reporter.line('  parse: ok');
    expect(out.text()).toBe('  parse: ok\n');
  });

  it('on a terminal, erases the progress line before the result', () => {
    const out = captureStream(true);
    const reporter = createTerminalReporter(out.stream, createStyle(false));
    reporter.progress('  parse(sample)…');
    reporter.line('  parse: ok');
    expect(out.text()).toBe('  parse(sample)…\r\u001b[2K  parse: ok\n');
  });
});
