// Reads the response channel (the child's fd 3): bytes nobody may trust until the per-call
// nonce, then a length and a body. An empty body is the runner's ready notice; the next frame
// is the response. Memory stays flat whatever arrives: bytes before a nonce are scanned and
// dropped, and a body over the cap is never buffered.

import {
  envelopeAllowance,
  estimateParsedCost,
  overBudgetMessage,
  resultMemoryBudget,
} from '../protocol/json-cost.ts';
import { ParserResponseSchema } from '../protocol/schemas.ts';
import type { ParserResponse } from '../protocol/wire.ts';
import { lengthBytes, nonceBytes, readyLength } from '../protocol/wire.ts';

/**
 * The deepest response the host parses. The runner's `JSON.stringify` overflows its stack near
 * 5 000 levels, so no honest response comes close; a deeper body (only a child that stole the
 * nonce could send one) is refused before `JSON.parse`, which would block the host for seconds.
 */
export const maxResponseDepth = 10_000;

/** What the reader concluded so far. */
export type ReaderState =
  | { kind: 'reading' }
  | { kind: 'complete'; response: ParserResponse }
  | { kind: 'refused'; reason: 'too-large' | 'malformed'; message: string };

/** Incremental parser of one response channel; feed it every chunk with {@link push}. */
export class ResponseReader {
  readonly #nonce: Buffer;
  readonly #maxOutputBytes: number;
  #ready = false;
  #tail: Buffer = Buffer.alloc(0);
  #skipped = 0;
  /** Bytes of the length after a nonce; undefined while scanning for a nonce. */
  #header: Buffer | undefined;
  #bodyLength = -1;
  #body: Buffer[] = [];
  #bodyReceived = 0;
  #state: ReaderState = { kind: 'reading' };
  readonly #onReady: (() => void) | undefined;

  constructor(nonce: Buffer, maxOutputBytes: number, onReady?: () => void) {
    this.#nonce = nonce;
    this.#maxOutputBytes = maxOutputBytes;
    this.#onReady = onReady;
  }

  /** Whether the runner has said it is ready for a request. */
  get ready(): boolean {
    return this.#ready;
  }

  /** The current conclusion. */
  get state(): ReaderState {
    return this.#state;
  }

  /** Takes the next chunk of the channel and returns the state after it. */
  push(chunk: Buffer): ReaderState {
    let rest = chunk;
    while (this.#state.kind === 'reading' && rest.length > 0) {
      rest = this.#header === undefined ? this.#scan(rest) : this.#collect(rest);
    }
    return this.#state;
  }

  /** Looks for the nonce; returns what follows it, or an empty buffer. */
  #scan(chunk: Buffer): Buffer {
    const window = this.#tail.length === 0 ? chunk : Buffer.concat([this.#tail, chunk]);
    const at = window.indexOf(this.#nonce);
    if (at === -1) {
      const keep = Math.min(window.length, nonceBytes - 1);
      this.#skipped += window.length - keep;
      // Copy so that a large chunk is not kept alive by a small view of it.
      this.#tail = Buffer.from(window.subarray(window.length - keep));
      if (this.#skipped > this.#maxOutputBytes) {
        this.#refuse(
          'too-large',
          `the response channel carried over ${this.#maxOutputBytes} bytes that were no response`,
        );
      }
      return Buffer.alloc(0);
    }
    this.#skipped += at;
    this.#header = Buffer.alloc(0);
    this.#tail = Buffer.alloc(0);
    return window.subarray(at + nonceBytes);
  }

  /** Reads the length, then the body; returns what follows the frame. */
  #collect(chunk: Buffer): Buffer {
    let rest = chunk;
    if (this.#bodyLength === -1) {
      const header = Buffer.concat([this.#header as Buffer, rest]);
      if (header.length < lengthBytes) {
        this.#header = header;
        return Buffer.alloc(0);
      }
      this.#bodyLength = header.readUInt32BE(0);
      rest = header.subarray(lengthBytes);
      if (this.#bodyLength === readyLength) return this.#readyNotice(rest);
      if (this.#bodyLength > this.#maxOutputBytes + envelopeAllowance) {
        this.#refuse(
          'too-large',
          `parser response is ${this.#bodyLength} bytes, over maxOutputBytes (${this.#maxOutputBytes})`,
        );
        return Buffer.alloc(0);
      }
    }
    const needed = this.#bodyLength - this.#bodyReceived;
    const piece = rest.length > needed ? rest.subarray(0, needed) : rest;
    if (piece.length > 0) {
      this.#body.push(piece);
      this.#bodyReceived += piece.length;
    }
    if (this.#bodyReceived === this.#bodyLength) this.#finish();
    return Buffer.alloc(0);
  }

  #readyNotice(rest: Buffer): Buffer {
    this.#header = undefined;
    this.#bodyLength = -1;
    if (this.#ready) {
      this.#refuse('malformed', 'the runner said it was ready twice');
      return Buffer.alloc(0);
    }
    this.#ready = true;
    this.#onReady?.();
    return rest;
  }

  #finish(): void {
    const text = Buffer.concat(this.#body).toString('utf8');
    this.#body = [];
    // Bounded by its bytes: a shape that would make the host hold more is refused unparsed.
    const budget = resultMemoryBudget(this.#maxOutputBytes);
    const cost = estimateParsedCost(text, maxResponseDepth, budget);
    if ('refused' in cost) {
      this.#refuse('malformed', `the response is nested deeper than ${maxResponseDepth} levels`);
      return;
    }
    if (cost.bytes > budget) {
      this.#refuse('too-large', overBudgetMessage(this.#maxOutputBytes, text.length));
      return;
    }
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      this.#refuse('malformed', 'the response is not JSON');
      return;
    }
    const response = toResponse(parsed);
    if (response === undefined) this.#refuse('malformed', 'the response has the wrong shape');
    else this.#state = { kind: 'complete', response };
  }

  #refuse(reason: 'too-large' | 'malformed', message: string): void {
    this.#state = { kind: 'refused', reason, message };
    this.#body = [];
    this.#tail = Buffer.alloc(0);
  }
}

/** The response if `value` has its shape (the schema docs/parser-protocol.md shows). */
function toResponse(value: unknown): ParserResponse | undefined {
  const parsed = ParserResponseSchema.safeParse(value);
  return parsed.success ? parsed.data : undefined;
}
