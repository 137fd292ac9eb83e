// Admits at most `maxConcurrent` calls at once; the rest wait in FIFO order, up to `maxQueued`.

/** Why a call was not admitted. */
export type AdmissionRefusal = 'full' | 'aborted' | 'closed';

/** A FIFO semaphore for calls. */
export class CallQueue {
  readonly #maxConcurrent: number;
  readonly #maxQueued: number;
  #running = 0;
  #closed = false;
  readonly #waiting: Array<{ admit: () => void; refuse: (why: AdmissionRefusal) => void }> = [];

  constructor(maxConcurrent: number, maxQueued: number) {
    this.#maxConcurrent = maxConcurrent;
    this.#maxQueued = maxQueued;
  }

  /** Calls running now. */
  get running(): number {
    return this.#running;
  }

  /** Calls waiting now. */
  get queued(): number {
    return this.#waiting.length;
  }

  /**
   * Resolves `undefined` once the call may run (then call {@link release} exactly once), or the
   * reason it may not.
   */
  admit(signal?: AbortSignal): Promise<AdmissionRefusal | undefined> {
    if (this.#closed) return Promise.resolve('closed');
    if (signal?.aborted) return Promise.resolve('aborted');
    if (this.#running < this.#maxConcurrent) {
      this.#running++;
      return Promise.resolve(undefined);
    }
    if (this.#waiting.length >= this.#maxQueued) return Promise.resolve('full');
    return new Promise((resolve) => {
      const entry = {
        admit: () => {
          signal?.removeEventListener('abort', onAbort);
          this.#running++;
          resolve(undefined);
        },
        refuse: (why: AdmissionRefusal) => {
          signal?.removeEventListener('abort', onAbort);
          resolve(why);
        },
      };
      const onAbort = (): void => {
        const at = this.#waiting.indexOf(entry);
        if (at !== -1) this.#waiting.splice(at, 1);
        entry.refuse('aborted');
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      this.#waiting.push(entry);
    });
  }

  /** Ends one admitted call and admits the next waiting one. */
  release(): void {
    this.#running--;
    const next = this.#waiting.shift();
    next?.admit();
  }

  /** Refuses every waiting call and every later one. */
  close(): void {
    this.#closed = true;
    for (const entry of this.#waiting.splice(0)) entry.refuse('closed');
  }
}
