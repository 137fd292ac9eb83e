// The warm spares of one host: children started with the host's default limits, module loaded,
// each blocked reading the one request it will serve. A call with those limits takes one; the
// host tops the pool up once that call has its result.
import type { ParserLimits } from '@coda/sandbox-core';
import type { RunnerProcess } from './runner-process.ts';

/** What the host keeps started ahead of calls: warm spares, or fork-server slots. */
export interface RunnerPool<Runner> {
  /** How many the pool keeps. */
  readonly size: number;
  /** Whether fewer than `size` are in the pool now. */
  readonly needsFill: boolean;
  /** One that can serve a call with `limits` now, if there is one. */
  take(limits: ParserLimits): Runner | undefined;
  /** Starts members until the pool is full; throws (having stopped) when one fails to start. */
  fill(): void;
  /** Resolves when every member in the pool now is ready for a request (or has died). */
  ready(): Promise<void>;
  /** Kills every member. */
  discardAll(): void;
}

function sameLimits(a: ParserLimits, b: ParserLimits): boolean {
  return a.timeout === b.timeout && a.memoryBytes === b.memoryBytes && a.cpuSecs === b.cpuSecs;
}

/** Up to `size` waiting children, each used once. */
export class SparePool implements RunnerPool<RunnerProcess> {
  readonly size: number;
  readonly #start: () => RunnerProcess;
  #spares: RunnerProcess[] = [];

  constructor(size: number, start: () => RunnerProcess) {
    this.size = size;
    this.#start = start;
  }

  /** Spares waiting now (dead ones are dropped first). */
  get #waiting(): readonly RunnerProcess[] {
    this.#spares = this.#spares.filter((spare) => spare.usable);
    return this.#spares;
  }

  get needsFill(): boolean {
    return this.#waiting.length < this.size;
  }

  /** Takes a spare started with `limits`, the one waiting longest first, if there is one. */
  take(limits: ParserLimits): RunnerProcess | undefined {
    const index = this.#waiting.findIndex((spare) => sameLimits(spare.limits, limits));
    if (index === -1) return undefined;
    const [spare] = this.#spares.splice(index, 1);
    return spare;
  }

  fill(): void {
    while (this.needsFill) this.#spares.push(this.#start());
  }

  async ready(): Promise<void> {
    await Promise.all(this.#waiting.map((spare) => spare.ready));
  }

  discardAll(): void {
    for (const spare of this.#spares) spare.discard();
    this.#spares = [];
  }
}
