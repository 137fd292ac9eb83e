// One slot of `processModel: 'fork-server'`: a confined Python zygote (its own sandbox, memory
// cgroup and rlimits) that has loaded the module and forks a fresh child per call, one call at a
// time. The host writes each call's nonce and request on the zygote's stdin; only that call's
// child reads them. The zygote says on fd 4 when the child is ready and how it ended. Anything
// short of a clean end (a signal, an exit code the runner never uses after answering, no
// answer, a process left behind, a limit the host enforced) retires the slot: the whole sandbox
// is killed and the host starts another zygote.
import { randomBytes } from 'node:crypto';
import type { ParserLimits } from '@coda/sandbox-core';
import { z } from 'zod';
import { lengthBytes, nonceBytes, runnerExitCode } from '../protocol/wire.ts';
import type { ChildExit, ParserChild } from '../spawn/child.ts';
import { watchCall } from './call-watch.ts';
import { classify, type KillReason, signalNames } from './classify.ts';
import { ControlLines } from './control-lines.ts';
import { OutputCapture } from './output-capture.ts';
import { ResponseReader } from './response-reader.ts';
import type { ParserResult } from './result.ts';
import type { CallRequest, OutputCaps } from './runner-process.ts';
import { streamsClosed } from './stream-drain.ts';

/** The zygote's control lines are a few dozen bytes; a longer one is not from the zygote. */
const maxControlLineBytes = 256;

/** What the zygote writes on fd 4, one JSON object a line. */
const ControlLineSchema = z.union([
  z.strictObject({ ready: z.literal(true) }),
  z.strictObject({
    exitCode: z.number().int().nonnegative().nullable(),
    signal: z.number().int().positive().nullable(),
    leftover: z.boolean(),
  }),
]);

/** How a call's child ended, as the zygote saw it (waitpid). */
interface ChildEnd {
  exitCode: number | null;
  signal: number | null;
  leftover: boolean;
}

/** The exit codes a runner uses after it has answered: ok, or an error response. */
const answeredExitCodes: readonly number[] = [runnerExitCode.ok, runnerExitCode.error];

/** The one call a slot is serving. */
interface CurrentCall {
  reader: ResponseReader;
  capture: OutputCapture;
  killed: KillReason | undefined;
  ended: (end: ChildEnd) => void;
}

/** A zygote serving calls one at a time, each in a fresh forked child. */
export class ForkServerSlot {
  readonly child: ParserChild;
  /** The memory limit the slot was started with: its cgroup's, and the most a call may ask for. */
  readonly memoryBytes: number;
  readonly #caps: OutputCaps;
  #current: CurrentCall | undefined;
  #retired = false;
  #exited = false;
  readonly #controlLines = new ControlLines(maxControlLineBytes, (line) =>
    this.#onControlLine(line),
  );
  /** Children the zygote said were ready, and calls sent: ready while the first is ahead. */
  #childrenReady = 0;
  #callsSent = 0;
  #waitingForReady: (() => void)[] = [];

  constructor(child: ParserChild, limits: ParserLimits, caps: OutputCaps) {
    this.child = child;
    this.memoryBytes = limits.memoryBytes;
    this.#caps = caps;
    const { control } = child;
    if (control === undefined) throw new Error('a fork server needs its control channel (fd 4)');
    child.response.on('data', (chunk: Buffer) => {
      const call = this.#current;
      // Between calls nothing may arrive here: the children that could write are gone.
      if (call === undefined) {
        this.retire();
        return;
      }
      const state = call.reader.push(chunk);
      if (state.kind === 'refused' && state.reason === 'too-large') {
        this.#kill(call, { kind: 'output', message: state.message });
      }
    });
    for (const stream of [child.stdout, child.stderr]) {
      stream.on('data', (chunk: Buffer) => this.#current?.capture.push(chunk));
    }
    control.on('data', (chunk: Buffer) => {
      if (!this.#controlLines.push(chunk.toString('latin1'))) this.retire();
    });
    for (const stream of [child.stdin, child.stdout, child.stderr, child.response, control]) {
      stream.on('error', () => {});
    }
    void child.exited.then(() => {
      this.#exited = true;
      this.#wakeReadyWaiters();
    });
  }

  /** Whether the slot can take a call now: alive, not retired, not serving one. */
  get idle(): boolean {
    return this.alive && this.#current === undefined;
  }

  /** Whether the slot is still in service (it may be serving a call). */
  get alive(): boolean {
    return !this.#retired && !this.#exited;
  }

  /** Resolves when the zygote has a child waiting for the next call, or has exited. */
  get ready(): Promise<void> {
    if (this.#exited || this.#childrenReady > this.#callsSent) return Promise.resolve();
    return new Promise((resolve) => this.#waitingForReady.push(resolve));
  }

  /** Whether a call with `limits` may run here: its memory fits the slot's cgroup. */
  accepts(limits: ParserLimits): boolean {
    return this.idle && limits.memoryBytes <= this.memoryBytes;
  }

  /** Takes the slot out of service and kills its sandbox (zygote, child, anything left). */
  retire(): void {
    this.#retired = true;
    this.child.kill();
  }

  /** Sends one call to the zygote's waiting child and resolves to its result; never rejects. */
  async run(request: CallRequest, startedAt: number): Promise<ParserResult> {
    const nonce = randomBytes(nonceBytes);
    let ended: (end: ChildEnd) => void = () => {};
    const childEnded = new Promise<ChildEnd>((resolve) => {
      ended = resolve;
    });
    const call: CurrentCall = {
      reader: new ResponseReader(nonce, this.#caps.maxOutputBytes),
      capture: new OutputCapture(this.#caps.maxStderrBytes),
      killed: undefined,
      ended,
    };
    this.#current = call;
    this.#callsSent++;
    const header = Buffer.alloc(lengthBytes);
    header.writeUInt32BE(request.body.length);
    this.child.stdin.write(Buffer.concat([nonce, header, request.body]));
    const stopWatching = watchCall(request, this.child, (reason) => this.#kill(call, reason));
    const end = await Promise.race([childEnded, this.child.exited.then(() => undefined)]);
    stopWatching();
    const exit = await this.#exitOf(call, end);
    this.#current = undefined;
    return classify({
      exit,
      reader: call.reader.state,
      killed: call.killed,
      heapExhausted: false,
      limits: request.limits,
      stderr: call.capture.text(),
      durationMs: Math.round((performance.now() - startedAt) * 1000) / 1000,
      confinement: this.child.confinement,
    });
  }

  /**
   * The call's exit: the child's own when the zygote reported it and the slot survives it,
   * otherwise the sandbox's (which also tells whether the memory cgroup hit its limit).
   */
  async #exitOf(call: CurrentCall, end: ChildEnd | undefined): Promise<ChildExit> {
    if (end !== undefined && call.killed === undefined) {
      // The child wrote everything before it exited, and the zygote reported after that: what
      // is still in the pipes is read in this turn of the event loop.
      await new Promise((resolve) => setImmediate(resolve));
      // A large answer's last chunk may need one more read.
      if (call.reader.state.kind === 'reading') await new Promise((done) => setTimeout(done, 50));
      const signal = end.signal === null ? null : (signalNames.get(end.signal) ?? null);
      // An exit code at all means no signal.
      const clean =
        !end.leftover &&
        end.exitCode !== null &&
        answeredExitCodes.includes(end.exitCode) &&
        call.reader.state.kind === 'complete';
      if (clean) return { exitCode: end.exitCode, signal: null };
      this.retire();
      if (signal === null) return { exitCode: end.exitCode, signal: null };
      // Killed (the OOM killer, RLIMIT_CPU, a crash): the cgroup knows whether memory did it.
      const { memoryExceeded } = await this.child.exited;
      return { exitCode: null, signal, ...(memoryExceeded === true ? { memoryExceeded } : {}) };
    }
    this.retire();
    const exit = await this.child.exited;
    await streamsClosed([this.child.response, this.child.stdout, this.child.stderr]);
    return exit;
  }

  #kill(call: CurrentCall, reason: KillReason): void {
    call.killed ??= reason;
    this.retire();
  }

  #wakeReadyWaiters(): void {
    for (const wake of this.#waitingForReady.splice(0)) wake();
  }

  #onControlLine(line: string): void {
    let parsed: z.output<typeof ControlLineSchema> | undefined;
    try {
      parsed = ControlLineSchema.safeParse(JSON.parse(line)).data;
    } catch {
      parsed = undefined;
    }
    if (parsed !== undefined && 'ready' in parsed) {
      this.#childrenReady++;
      this.#wakeReadyWaiters();
    } else if (parsed !== undefined && this.#current !== undefined) {
      this.#current.ended(parsed);
    } else {
      // Not a line the zygote writes, or a call's end with no call sent.
      this.retire();
    }
  }
}
