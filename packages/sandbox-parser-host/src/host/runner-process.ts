// One runner child from spawn to result. Listeners go on at spawn, so a warm spare's output is
// drained (and its ready byte seen) while it waits; `run` sends the request and watches the
// limits the host enforces itself: wall clock, cancellation, resident memory, output size.
import { randomBytes } from 'node:crypto';
import type { ParserLimits } from '@coda/sandbox-core';
import { lengthBytes } from '../protocol/wire.ts';
import type { ParserChild } from '../spawn/child.ts';
import { type WatchedCall, watchCall } from './call-watch.ts';
import { type CallOutcome, classify, type KillReason } from './classify.ts';
import { OutputCapture } from './output-capture.ts';
import { ResponseReader } from './response-reader.ts';
import type { ParserResult } from './result.ts';
import { streamsClosed } from './stream-drain.ts';

const heapExhaustedMarkers = ['JavaScript heap out of memory', 'Reached heap limit'];

/** The host's output caps, shared by all its children. */
export interface OutputCaps {
  maxOutputBytes: number;
  maxStderrBytes: number;
}

/** What one call hands to its child. */
export interface CallRequest extends WatchedCall {
  /** The request body (UTF-8 JSON). */
  body: Buffer;
  /**
   * The same request in two texts, for the isolate child: the envelope (without the payload) and
   * the payload's JSON, which it copies into the call's isolate unparsed.
   */
  isolateParts?: { envelope: string; payloadJson: string };
}

/** A spawned runner child serving exactly one call. */
export class RunnerProcess {
  readonly child: ParserChild;
  /** The limits the child was started with. */
  readonly limits: ParserLimits;
  /** Resolves when the runner is ready for its request, or has exited. */
  readonly ready: Promise<void>;
  readonly #nonce = randomBytes(32);
  readonly #spawnedAt = performance.now();
  /** When the runner had loaded the module and was ready for its request. */
  #readyAt: number | undefined;
  readonly #reader: ResponseReader;
  readonly #capture: OutputCapture;
  #stderrTail = '';
  #used = false;
  #exitedEarly = false;
  #killed: KillReason | undefined;

  constructor(child: ParserChild, limits: ParserLimits, caps: OutputCaps) {
    this.child = child;
    this.limits = limits;
    this.#capture = new OutputCapture(caps.maxStderrBytes);
    let markReady: () => void = () => {};
    this.ready = new Promise((resolve) => {
      markReady = resolve;
    });
    this.#reader = new ResponseReader(this.#nonce, caps.maxOutputBytes, () => {
      this.#readyAt ??= performance.now();
      markReady();
    });
    child.response.on('data', (chunk: Buffer) => {
      const state = this.#reader.push(chunk);
      if (state.kind === 'refused' && state.reason === 'too-large') {
        this.#kill({ kind: 'output', message: state.message });
      }
    });
    child.stdout.on('data', (chunk: Buffer) => this.#capture.push(chunk));
    child.stderr.on('data', (chunk: Buffer) => {
      this.#capture.push(chunk);
      // A short tail of stderr, kept apart from the capped capture, to recognise V8's OOM note.
      this.#stderrTail = (this.#stderrTail + chunk.toString('latin1')).slice(-2048);
    });
    for (const stream of [child.stdin, child.stdout, child.stderr, child.response]) {
      stream.on('error', () => {});
    }
    // The nonce goes first, at spawn: the runner takes it before it loads the parser module.
    child.stdin.write(this.#nonce);
    void child.exited.then(() => {
      this.#exitedEarly = !this.#used;
      markReady();
    });
  }

  /** Whether this child can still take its one request (it has not been used nor died). */
  get usable(): boolean {
    return !this.#used && !this.#exitedEarly;
  }

  /** Whether this child was given its call (or discarded). */
  get served(): boolean {
    return this.#used;
  }

  /** Kills the child without a call, such as a spare the host no longer needs. */
  discard(): void {
    this.#used = true;
    this.child.kill();
  }

  /** Sends the request and resolves to the result; never rejects. */
  async run(request: CallRequest, startedAt: number): Promise<ParserResult> {
    this.#used = true;
    const { child } = this;
    const header = Buffer.alloc(lengthBytes);
    header.writeUInt32BE(request.body.length);
    child.stdin.end(Buffer.concat([header, request.body]));

    const stopWatching = watchCall(request, child, (reason) => this.#kill(reason));
    const exit = await child.exited;
    stopWatching();
    await streamsClosed([child.response, child.stdout, child.stderr]);

    const outcome: CallOutcome = {
      exit,
      reader: this.#reader.state,
      killed: this.#killed,
      heapExhausted: heapExhaustedMarkers.some((marker) => this.#stderrTail.includes(marker)),
      limits: request.limits,
      stderr: this.#capture.text(),
      durationMs: Math.round((performance.now() - startedAt) * 1000) / 1000,
      // Its busy time: loading (a warm spare's import spends CPU before the call) and the call;
      // a spare's idle wait between them spends none (counted, a parser's own SIGXCPU on a
      // spare idle 3 s read as the CPU limit: found by a review).
      lifetimeMs:
        Math.max(0, Math.min(this.#readyAt ?? startedAt, startedAt) - this.#spawnedAt) +
        (performance.now() - startedAt),
      confinement: child.confinement,
      // After the exit: the subprocess layer has closed the child's proxy listener by then.
      network: child.network?.report(),
    };
    return classify(outcome);
  }

  #kill(reason: KillReason): void {
    this.#killed ??= reason;
    this.child.kill();
  }
}
