// A child's control channel read as lines: the fork server's zygote and the isolate server's
// child both report on one, one JSON line per event. What the child writes is untrusted: an
// unfinished line is held only up to a bound.

/** Splits a control channel's text into lines as it arrives. */
export class ControlLines {
  readonly #maxLineLength: number;
  readonly #onLine: (line: string) => void;
  #rest = '';

  /** `onLine` gets each whole line, without its newline. */
  constructor(maxLineLength: number, onLine: (line: string) => void) {
    this.#maxLineLength = maxLineLength;
    this.#onLine = onLine;
  }

  /**
   * Takes the next piece of text. False when what is left unfinished is longer than
   * `maxLineLength` characters: no honest child writes such a line, so the caller retires it.
   */
  push(text: string): boolean {
    this.#rest += text;
    let newline = this.#rest.indexOf('\n');
    while (newline !== -1) {
      const line = this.#rest.slice(0, newline);
      this.#rest = this.#rest.slice(newline + 1);
      this.#onLine(line);
      newline = this.#rest.indexOf('\n');
    }
    return this.#rest.length <= this.#maxLineLength;
  }
}
