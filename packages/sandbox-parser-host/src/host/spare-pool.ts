// The warm spares of one host: children started with the host's default limits, module loaded,
// each blocked reading the one request it will serve. A call with those limits takes one; the
// host tops the pool up once that call has its result.
import type { ParserLimits } from '@coda/sandbox-core';
import type { RunnerProcess } from './runner-process.ts';

function sameLimits(a: ParserLimits, b: ParserLimits): boolean {
  return a.timeout === b.timeout && a.memoryBytes === b.memoryBytes && a.cpuSecs === b.cpuSecs;
}

/** Up to `size` waiting children. */
export class SparePool {
  readonly size: number;
  #spares: RunnerProcess[] = [];

  constructor(size: number) {
    this.size = size;
  }

  /** Spares waiting now (dead ones are dropped first). */
  get waiting(): readonly RunnerProcess[] {
    this.#spares = this.#spares.filter((spare) => spare.usable);
    return this.#spares;
  }

  /** Takes a spare started with `limits`, the one waiting longest first, if there is one. */
  take(limits: ParserLimits): RunnerProcess | undefined {
    const index = this.waiting.findIndex((spare) => sameLimits(spare.limits, limits));
    if (index === -1) return undefined;
    const [spare] = this.#spares.splice(index, 1);
    return spare;
  }

  /** Starts spares with `start` until the pool is full; stops at the first that fails to start. */
  fill(start: () => RunnerProcess): void {
    while (this.waiting.length < this.size) this.#spares.push(start());
  }

  /** Resolves when every spare waiting now is ready for its request (or has died). */
  async ready(): Promise<void> {
    await Promise.all(this.waiting.map((spare) => spare.ready));
  }

  /** Kills every spare. */
  discardAll(): void {
    for (const spare of this.#spares) spare.discard();
    this.#spares = [];
  }
}
