// The host side of `processModel: 'isolate'`: one long-lived confined Node child
// (src/runner/isolate-runner.ts) serving every call of the host, each in a fresh isolated-vm
// isolate. Calls go out multiplexed on its stdin; each answer comes back on fd 3 as the spawn
// runner's frame, opened by that call's own nonce and checked by the same ResponseReader (output
// cap, depth, shape); fd 4 says when each call's isolate is gone and why. A child that dies, or
// does not end a call within its wall clock plus a grace, is killed; every call in flight on it
// fails `CRASH`, and the pool starts another child for the next call.
import { randomBytes } from 'node:crypto';
import type { ParserLimits } from '@coda/sandbox-core';
import { z } from 'zod';
import { lengthBytes, nonceBytes, runnerExitCode } from '../protocol/wire.ts';
import type { ChildExit, ParserChild } from '../spawn/child.ts';
import { classify, effectiveExit, type KillReason } from './classify.ts';
import { ControlLines } from './control-lines.ts';
import { watchMemory } from './memory-watch.ts';
import { OutputCapture } from './output-capture.ts';
import { type ReaderState, ResponseReader } from './response-reader.ts';
import type { ParserFailure, ParserResult } from './result.ts';
import type { CallRequest, OutputCaps } from './runner-process.ts';

/** How long past its wall clock the child has to end a call before it is taken for stuck. */
export const isolateEndGraceMs = 2_000;

/** The child's control lines are a few dozen bytes; a longer one is not the child's. */
const maxControlLineBytes = 4_096 + 16_384;

const callFrame = 1;
const cancelFrame = 2;

const ControlLineSchema = z.union([
  z.strictObject({ ready: z.literal(true), loadError: z.string().optional() }),
  z.strictObject({
    end: z.number().int().nonnegative(),
    reason: z.enum(['answered', 'timeout', 'cpu', 'cancelled']),
  }),
]);

/** How a call ended, before it becomes a ParserResult. */
type CallEnd =
  | { kind: 'frame'; state: ReaderState }
  | { kind: 'killed'; reason: KillReason }
  | { kind: 'cpu' }
  | {
      kind: 'child-died';
      exit: ChildExit;
      why: string | undefined;
      /** Whether other calls were in flight with it: then any of them may have killed it. */
      shared: boolean;
    };

/**
 * Runs a call lost with a shared child once more, alone on a child of its own (attack-25): one
 * call that makes V8 fail (`'x'.repeat(2 ** 28).split('')` is a fatal error, SIGTRAP) or fills
 * the child's memory past its isolate's limit in a builtin V8 does not interrupt
 * (`new Array(1e9).fill(0)`) took every call beside it down with `CRASH`. A parser call has no
 * side effects outside its isolate, so running it again is safe; one that kills its own child
 * again ends with that `CRASH`.
 */
export type RunAlone = (request: CallRequest, startedAt: number) => Promise<ParserResult>;

/** One call sent to the child and not yet ended there. */
interface InFlight {
  id: number;
  nonceKey: string;
  reader: ResponseReader;
  limits: ParserLimits;
  /** Settles the call's result (the first end wins). */
  settle: (end: CallEnd) => void;
  /** Whether the call has its result; the child may still be disposing its isolate. */
  settled: boolean;
  /** Whether the child said the call's isolate is gone (its `end` line). */
  endSeen: boolean;
  /** Whether its answer frame was read to its end. */
  frameRead: boolean;
  backstop: NodeJS.Timeout;
}

/** The one isolate child of a host. */
export class IsolateServer {
  readonly child: ParserChild;
  /** The memory the child was started with: what one call may ask for at most, times slots. */
  readonly #caps: OutputCaps;
  readonly #calls = new Map<number, InFlight>();
  readonly #byNonce = new Map<string, InFlight>();
  /** Calls sent and without their result: all fail `CRASH` if the child dies. */
  readonly #unsettled = new Set<InFlight>();
  readonly #stderr: OutputCapture;
  readonly ready: Promise<void>;
  #nextId = 1;
  #retired = false;
  #exited = false;
  #killedFor: string | undefined;
  readonly #controlLines = new ControlLines(maxControlLineBytes, (line) =>
    this.#onControlLine(line),
  );
  /** The frame being read on fd 3: its call (undefined: not one in flight) and bytes left. */
  #frameHeader = Buffer.alloc(0);
  #frameCall: InFlight | undefined;
  #frameLeft = 0;
  #markReady: () => void = () => {};

  readonly #runAlone: RunAlone | undefined;

  constructor(child: ParserChild, memoryBudget: number, caps: OutputCaps, runAlone?: RunAlone) {
    this.child = child;
    this.#runAlone = runAlone;
    this.#caps = caps;
    this.#stderr = new OutputCapture(caps.maxStderrBytes);
    this.ready = new Promise((resolve) => {
      this.#markReady = resolve;
    });
    const { control } = child;
    if (control === undefined) throw new Error('the isolate child needs its control channel');
    child.response.on('data', (chunk: Buffer) => this.#onResponse(chunk));
    control.on('data', (chunk: Buffer) => {
      if (!this.#controlLines.push(chunk.toString('utf8')))
        this.#retire('wrote a bad control line');
    });
    // Parser code has no console: what arrives here is the child's own (a crash report).
    for (const stream of [child.stdout, child.stderr]) {
      stream.on('data', (chunk: Buffer) => this.#stderr.push(chunk));
    }
    for (const stream of [child.stdin, child.stdout, child.stderr, child.response, control]) {
      stream.on('error', () => {});
    }
    const stopMemory =
      child.confinement.memory === 'rss-watchdog' && child.pid !== undefined
        ? watchMemory(child.pid, memoryBudget, (resident) =>
            this.#retire(`held ${resident} bytes, over its ${memoryBudget}`),
          )
        : () => {};
    void child.exited.then((exit) => {
      stopMemory();
      this.#exited = true;
      this.#markReady();
      const why = this.#killedFor;
      const shared = this.#unsettled.size > 1;
      // Every call without its result, whatever the child said of it.
      for (const call of [...this.#unsettled]) {
        call.settle({ kind: 'child-died', exit, why, shared });
      }
      this.#calls.clear();
      this.#byNonce.clear();
    });
  }

  /** Whether the child is in service. */
  get alive(): boolean {
    return !this.#retired && !this.#exited;
  }

  /** Kills the child (and with it every isolate); calls in flight fail `CRASH`. */
  retire(): void {
    this.#retire('was retired');
  }

  #retire(why: string): void {
    this.#killedFor ??= why;
    this.#retired = true;
    this.child.kill();
  }

  /** Sends one call to the child and resolves to its result; never rejects. */
  async run(request: CallRequest, startedAt: number): Promise<ParserResult> {
    const id = this.#nextId++;
    const nonce = randomBytes(nonceBytes);
    let settle: (end: CallEnd) => void = () => {};
    const ended = new Promise<CallEnd>((resolve) => {
      settle = resolve;
    });
    const call: InFlight = {
      id,
      nonceKey: nonce.toString('hex'),
      reader: new ResponseReader(nonce, this.#caps.maxOutputBytes),
      limits: request.limits,
      settle: (end) => {
        if (call.settled) return;
        call.settled = true;
        this.#unsettled.delete(call);
        settle(end);
      },
      settled: false,
      endSeen: false,
      frameRead: false,
      // The child ends every call by its wall clock; one it has not ended by then is stuck.
      backstop: setTimeout(
        () => this.#retire(`did not end a call ${isolateEndGraceMs} ms past its wall clock`),
        request.limits.timeout + isolateEndGraceMs,
      ),
    };
    call.backstop.unref();
    if (!this.alive) {
      // It never ran here: it is nobody's fault.
      const exit = await this.child.exited;
      call.settle({ kind: 'child-died', exit, why: this.#killedFor, shared: true });
    } else {
      this.#calls.set(id, call);
      this.#byNonce.set(call.nonceKey, call);
      this.#unsettled.add(call);
      this.#send(callFrame, id, this.#callBody(nonce, request));
    }
    const cancel = (message: string): void => {
      if (call.settled) return;
      call.settle({ kind: 'killed', reason: { kind: 'cancelled', message } });
      this.#send(cancelFrame, id, Buffer.alloc(0));
    };
    const onAbort = (): void => cancel('parser call cancelled');
    const onClose = (): void => cancel('parser host closed');
    request.signal?.addEventListener('abort', onAbort, { once: true });
    request.closing.addEventListener('abort', onClose, { once: true });
    if (request.signal?.aborted) onAbort();
    if (request.closing.aborted) onClose();
    const end = await ended;
    request.signal?.removeEventListener('abort', onAbort);
    request.closing.removeEventListener('abort', onClose);
    if (
      end.kind === 'child-died' &&
      end.shared &&
      this.#runAlone !== undefined &&
      request.signal?.aborted !== true &&
      !request.closing.aborted
    ) {
      return this.#runAlone(request, startedAt);
    }
    const durationMs = Math.round((performance.now() - startedAt) * 1000) / 1000;
    return this.#resultOf(end, request.limits, durationMs);
  }

  #callBody(nonce: Buffer, request: CallRequest): Buffer {
    const parts = request.isolateParts;
    if (parts === undefined) throw new Error('an isolate call needs its request in parts');
    const envelope = Buffer.from(parts.envelope, 'utf8');
    const header = Buffer.alloc(lengthBytes);
    header.writeUInt32BE(envelope.length);
    return Buffer.concat([nonce, header, envelope, Buffer.from(parts.payloadJson, 'utf8')]);
  }

  #send(type: number, id: number, body: Buffer): void {
    if (!this.alive) return;
    const header = Buffer.alloc(9);
    header[0] = type;
    header.writeUInt32BE(id, 1);
    header.writeUInt32BE(body.length, 5);
    this.child.stdin.write(Buffer.concat([header, body]));
  }

  #resultOf(end: CallEnd, limits: ParserLimits, durationMs: number): ParserResult {
    const { confinement } = this.child;
    const outcome = {
      limits,
      heapExhausted: false,
      stderr: '',
      durationMs,
      confinement,
    };
    if (end.kind === 'frame') {
      const { state } = end;
      // The exit a spawn runner would have had after this answer.
      const exitCode =
        state.kind === 'complete'
          ? state.response.ok
            ? runnerExitCode.ok
            : runnerExitCode.error
          : null;
      return classify({
        ...outcome,
        exit: { exitCode, signal: null },
        reader: state,
        killed: undefined,
      });
    }
    if (end.kind === 'killed') {
      return classify({
        ...outcome,
        exit: { exitCode: null, signal: null },
        reader: { kind: 'reading' },
        killed: end.reason,
      });
    }
    const failure = (code: ParserFailure['code'], error: string): ParserFailure => ({
      ok: false,
      code,
      error,
      timedOut: false,
      exitCode: null,
      durationMs,
      stderr: '',
      confinement,
    });
    if (end.kind === 'cpu') {
      return failure('TIMEOUT', `CPU time limit exceeded (${limits.cpuSecs} s)`);
    }
    // Under bubblewrap the child's death by signal N is bwrap's exit code 128 + N.
    const exit = effectiveExit(end.exit, confinement);
    const how =
      exit.signal === null ? `exited with code ${exit.exitCode}` : `was killed by ${exit.signal}`;
    const memory = exit.memoryExceeded === true ? ' (its memory cgroup was full)' : '';
    return {
      ...failure(
        'CRASH',
        `the isolate child ${how}${memory} with this call in flight${end.why === undefined ? '' : ` (the host killed it: it ${end.why})`}`,
      ),
      exitCode: exit.exitCode,
      ...(exit.signal === null ? {} : { signal: exit.signal }),
      stderr: this.#stderr.text(),
    };
  }

  /** Splits fd 3 into frames by their nonce: each call's bytes go to its own reader. */
  #onResponse(chunk: Buffer): void {
    let rest = chunk;
    while (rest.length > 0 && this.alive) {
      if (this.#frameLeft === 0) {
        const needed = nonceBytes + lengthBytes - this.#frameHeader.length;
        this.#frameHeader = Buffer.concat([this.#frameHeader, rest.subarray(0, needed)]);
        rest = rest.subarray(needed);
        if (this.#frameHeader.length < nonceBytes + lengthBytes) return;
        const header = this.#frameHeader;
        this.#frameHeader = Buffer.alloc(0);
        const call = this.#byNonce.get(header.subarray(0, nonceBytes).toString('hex'));
        const length = header.readUInt32BE(nonceBytes);
        if (call === undefined || call.frameRead || length === 0) {
          // Not a frame of a call in flight, or a second one: the child is off the protocol.
          this.#retire('sent a frame of no call in flight');
          return;
        }
        this.#frameCall = call;
        this.#frameLeft = length;
        call.reader.push(header);
        continue;
      }
      const piece = rest.subarray(0, this.#frameLeft);
      rest = rest.subarray(piece.length);
      this.#frameLeft -= piece.length;
      const call = this.#frameCall as InFlight;
      // A refused frame (over the cap) is skipped, never buffered: the reader drops the rest.
      const state = call.reader.push(piece);
      if (state.kind !== 'reading') call.settle({ kind: 'frame', state });
      if (this.#frameLeft === 0) {
        // A whole frame its reader did not take as one answer: not the protocol.
        if (state.kind === 'reading') this.#retire('sent a frame that was no answer');
        this.#frameCall = undefined;
        call.frameRead = true;
        // One frame per call: once its end line came too, its nonce opens nothing more.
        if (call.endSeen) this.#byNonce.delete(call.nonceKey);
      }
    }
  }

  #onControlLine(line: string): void {
    let parsed: z.output<typeof ControlLineSchema> | undefined;
    try {
      parsed = ControlLineSchema.safeParse(JSON.parse(line)).data;
    } catch {
      parsed = undefined;
    }
    if (parsed === undefined) {
      this.#retire('wrote a bad control line');
      return;
    }
    if ('ready' in parsed) {
      this.#markReady();
      return;
    }
    const call = this.#calls.get(parsed.end);
    if (call === undefined) {
      this.#retire('ended a call that was not in flight');
      return;
    }
    // Its isolate is disposed: the call holds nothing in the child any more.
    clearTimeout(call.backstop);
    call.endSeen = true;
    this.#calls.delete(call.id);
    if (parsed.reason === 'timeout') call.settle({ kind: 'killed', reason: { kind: 'timeout' } });
    else if (parsed.reason === 'cpu') call.settle({ kind: 'cpu' });
    if (parsed.reason !== 'answered' || call.frameRead) {
      this.#byNonce.delete(call.nonceKey);
      return;
    }
    // Its frame is written before its end line, but on another pipe: it may be on its way.
    setTimeout(() => {
      if (!call.settled) this.#retire('said it answered a call without its frame');
    }, 5_000).unref();
  }
}
