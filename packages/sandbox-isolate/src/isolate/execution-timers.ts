// The host side of `setTimeout` in an isolate: one Node timer per pending timer of one execution,
// on the thread that serves the isolate (a worker's main thread in `process` mode). A due timer
// only resolves a promise; the callback runs on the isolate's own thread.

/** What a timer's promise resolves with: `'1'` when it is due, `'0'` when it never fires. */
export type TimerAnswer = '1' | '0';

interface PendingTimer {
  timer: NodeJS.Timeout | undefined;
  resolve: (answer: TimerAnswer) => void;
}

/**
 * The timers of one execution. The isolate's bootstrap counts its pending timers too; this side
 * trusts none of it: it bounds the count itself, never schedules past the execution's deadline,
 * and `close()` (at the end, timeout or cancellation of the execution) clears every one.
 */
export class ExecutionTimers {
  readonly #pending = new Map<number, PendingTimer>();
  readonly #deadline: number;
  readonly #maxTimers: number;
  #closed = false;

  /** Timers of an execution that started at `startedAt` (performance.now()). */
  constructor(timeoutMs: number, maxTimers: number, startedAt: number) {
    this.#deadline = startedAt + timeoutMs;
    this.#maxTimers = maxTimers;
  }

  /**
   * Starts timer `id`, due in `delayMs`. A timer due at or past the deadline gets no Node timer:
   * the execution ends first (with `TIMEOUT` if user code waits for it). Refused ('0' at once)
   * once closed, over the bound, or for an id already pending.
   */
  start(id: unknown, delayMs: unknown): Promise<TimerAnswer> {
    if (
      this.#closed ||
      typeof id !== 'number' ||
      this.#pending.has(id) ||
      this.#pending.size >= this.#maxTimers
    ) {
      return Promise.resolve('0');
    }
    const delay = typeof delayMs === 'number' && delayMs > 0 ? delayMs : 0;
    return new Promise<TimerAnswer>((resolve) => {
      const entry: PendingTimer = { timer: undefined, resolve };
      if (performance.now() + delay < this.#deadline) {
        entry.timer = setTimeout(() => {
          this.#pending.delete(id);
          resolve('1');
        }, delay);
      }
      this.#pending.set(id, entry);
    });
  }

  /** Clears timer `id` (`clearTimeout` in the isolate); unknown ids are ignored. */
  clear(id: unknown): void {
    if (typeof id !== 'number') return;
    const entry = this.#pending.get(id);
    if (entry === undefined) return;
    this.#pending.delete(id);
    clearTimeout(entry.timer);
    entry.resolve('0');
  }

  /** Timers pending now (for tests and figures). */
  get size(): number {
    return this.#pending.size;
  }

  /** Clears every timer and refuses new ones: the execution is over. */
  close(): void {
    this.#closed = true;
    for (const entry of this.#pending.values()) {
      clearTimeout(entry.timer);
      entry.resolve('0');
    }
    this.#pending.clear();
  }
}
