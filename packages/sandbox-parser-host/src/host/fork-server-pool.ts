// The fork-server slots of one host (`processModel: 'fork-server'`): up to `size` zygotes, each
// serving one call at a time and staying for the next. A retired or dead slot leaves the pool;
// the host starts its replacement once the call that retired it has its result.
import type { ParserLimits } from '@coda/sandbox-core';
import type { ForkServerSlot } from './fork-server.ts';
import type { RunnerPool } from './spare-pool.ts';

/** Up to `size` zygotes in service. */
export class ForkServerPool implements RunnerPool<ForkServerSlot> {
  readonly size: number;
  readonly #start: () => ForkServerSlot;
  #slots: ForkServerSlot[] = [];

  constructor(size: number, start: () => ForkServerSlot) {
    this.size = size;
    this.#start = start;
  }

  /** Slots in service now (retired and dead ones are dropped first). */
  get #alive(): readonly ForkServerSlot[] {
    this.#slots = this.#slots.filter((slot) => slot.alive);
    return this.#slots;
  }

  get needsFill(): boolean {
    return this.#alive.length < this.size;
  }

  /** An idle slot whose cgroup fits `limits`, if there is one; it stays in the pool. */
  take(limits: ParserLimits): ForkServerSlot | undefined {
    return this.#alive.find((slot) => slot.accepts(limits));
  }

  fill(): void {
    while (this.needsFill) this.#slots.push(this.#start());
  }

  async ready(): Promise<void> {
    await Promise.all(this.#alive.map((slot) => slot.ready));
  }

  discardAll(): void {
    for (const slot of this.#slots) slot.retire();
    this.#slots = [];
  }
}
