// Where parts write what they are doing. On a terminal, lines appear as work progresses with a
// progress line that each result replaces; on a pipe or in a CI log only the result lines (no
// progress, which would repeat them); in --json mode nothing until main writes one JSON document.
import type { Writable } from 'node:stream';
import type { Style } from './style.ts';
import { formatTable } from './table.ts';

/** What a part writes to while it runs. */
export interface Reporter {
  readonly style: Style;
  /** Opens a part: a title line and one line on what it shows. */
  heading(title: string, summary: string): void;
  /** One line of output. */
  line(text?: string): void;
  /**
   * What is running now. On a terminal it replaces the previous progress line and disappears at
   * the next output; elsewhere (a pipe, a CI log) it is not printed: the result line that follows
   * says the same, once.
   */
  progress(text: string): void;
  /** A table, columns aligned. */
  table(headers: readonly string[], rows: readonly (readonly string[])[]): void;
}

/** A reporter that writes to `stream` (stdout in the terminal). */
export function createTerminalReporter(
  stream: Writable & { isTTY?: boolean },
  style: Style,
): Reporter {
  let progressShown = false;
  // Erases the progress line (carriage return, clear line) before anything else is written.
  const clearProgress = () => {
    if (progressShown) stream.write('\r\u001b[2K');
    progressShown = false;
  };
  const write = (text: string) => {
    clearProgress();
    stream.write(`${text}\n`);
  };
  return {
    style,
    heading(title, summary) {
      write('');
      write(style.bold(style.cyan(`━━ ${title}`)));
      write(style.dim(summary));
    },
    line(text = '') {
      write(text);
    },
    progress(text) {
      if (stream.isTTY !== true) return;
      clearProgress();
      stream.write(style.dim(text));
      progressShown = true;
    },
    table(headers, rows) {
      const [head = '', rule = '', ...body] = formatTable(headers, rows).split('\n');
      write(style.bold(head));
      write(style.dim(rule));
      for (const row of body) write(row);
    },
  };
}

/** A reporter that prints nothing: --json mode collects results instead. */
export function createSilentReporter(style: Style): Reporter {
  return { style, heading() {}, line() {}, progress() {}, table() {} };
}
