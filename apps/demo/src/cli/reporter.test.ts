import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { createTerminalReporter } from './reporter.ts';
import { createStyle } from './style.ts';

/** A stream that keeps what is written, a terminal or not. */
function capture(isTTY: boolean) {
  let text = '';
  const stream = Object.assign(
    new Writable({
      write(chunk: Buffer, _encoding, done) {
        text += chunk.toString('utf8');
        done();
      },
    }),
    { isTTY },
  );
  return { stream, text: () => text };
}

describe('createTerminalReporter', () => {
  it('prints only the result lines when stdout is not a terminal', () => {
    const out = capture(false);
    const reporter = createTerminalReporter(out.stream, createStyle(false));
    reporter.progress('  parse(sample)…');
    reporter.line('  parse: ok');
    expect(out.text()).toBe('  parse: ok\n');
  });

  it('on a terminal, erases the progress line before the result', () => {
    const out = capture(true);
    const reporter = createTerminalReporter(out.stream, createStyle(false));
    reporter.progress('  parse(sample)…');
    reporter.line('  parse: ok');
    expect(out.text()).toBe('  parse(sample)…\r\u001b[2K  parse: ok\n');
  });
});
