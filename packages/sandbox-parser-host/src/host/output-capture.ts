// Keeps the first bytes of the child's console output (stdout and stderr, interleaved as they
// arrive) and counts the rest, so a flood costs the host no memory.

/** A capped sink for console output. */
export class OutputCapture {
  readonly #limit: number;
  readonly #chunks: Buffer[] = [];
  #kept = 0;
  #dropped = 0;

  constructor(limit: number) {
    this.#limit = limit;
  }

  /** Adds one chunk; what goes over the limit is only counted. */
  push(chunk: Buffer): void {
    const room = this.#limit - this.#kept;
    if (room <= 0) {
      this.#dropped += chunk.length;
      return;
    }
    const piece = chunk.length > room ? Buffer.from(chunk.subarray(0, room)) : chunk;
    this.#chunks.push(piece);
    this.#kept += piece.length;
    this.#dropped += chunk.length - piece.length;
  }

  /** The kept output as text, with a note of how many bytes were dropped. */
  text(): string {
    const text = Buffer.concat(this.#chunks).toString('utf8');
    return this.#dropped === 0 ? text : `${text}\n[${this.#dropped} more bytes of output dropped]`;
  }

  /** Whether the kept output contains `needle`. */
  includes(needle: string): boolean {
    return Buffer.concat(this.#chunks).includes(needle);
  }
}
