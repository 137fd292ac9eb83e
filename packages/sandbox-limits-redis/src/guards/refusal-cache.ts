// Remembers, per key, until when the store said a check cannot be admitted, so that a caller
// hammering a refused key is refused here without a round trip. It only ever refuses: a key it
// does not know, or knows no longer, goes to the store.

/** What a cached refusal remembers: when it ends and when the bucket is full, on the host clock. */
interface CachedRefusal {
  /** The clock's time at which the store may admit again. */
  readonly until: number;
  /** The clock's time at which the bucket is full again. */
  readonly resetAt: number;
}

/** A refusal still in force, counted from now: what the guard's refusal reports. */
export interface RefusalLeft {
  /** Milliseconds until the store may admit again (at least 1). */
  readonly retryAfterMs: number;
  /** Milliseconds until the bucket is full again (at least 1). */
  readonly resetMs: number;
}

/** How many forgotten keys a cache remembers, to tell whose refusals went stale. */
const recentForgets = 256;

/**
 * A bounded map of refused keys. `refuse` records that the store refused `key` for `retryAfterMs`
 * from now (measured on arrival of the answer, so a cached refusal ends at most `retryAfterMs`
 * after the store's answer reached this host); `lookup` returns what is left of the refusal while
 * it lasts and forgets it once it has ended. When full, the least recently refused key is dropped
 * first. `now` is a monotonic clock in milliseconds (tests pass a fake one).
 */
export class RefusalCache {
  readonly #entries = new Map<string, CachedRefusal>();
  readonly #size: number;
  readonly #now: () => number;
  /** Counts `forget` calls: a refusal answered across one is not recorded (see `refuse`). */
  #forgets = 0;
  /** The last {@link recentForgets} keys forgotten, by their place in the count of forgets. */
  readonly #recent: (string | undefined)[] = [];

  constructor(size: number, now: () => number = () => performance.now()) {
    this.#size = size;
    this.#now = now;
  }

  /**
   * What is left of the refusal of `key`, if one is still in force. The clock is read only for a
   * key it holds: an admission (a key it does not hold) costs one Map lookup.
   */
  lookup(key: string): RefusalLeft | undefined {
    const entry = this.#entries.get(key);
    if (entry === undefined) return undefined;
    const now = this.#now();
    if (entry.until > now) {
      return {
        retryAfterMs: Math.max(1, Math.ceil(entry.until - now)),
        resetMs: Math.max(1, Math.ceil(entry.resetAt - now)),
      };
    }
    this.#entries.delete(key);
    return undefined;
  }

  /** A mark to pass to `refuse` for a check sent now. */
  get epoch(): number {
    return this.#forgets;
  }

  /**
   * Records a refusal of `key` by the store, for `retryAfterMs` (and a reset in `resetMs`).
   * `sentAt` is the {@link epoch} when the refused check was sent: if a key was forgotten since
   * (a unit refunded), the store may have answered before it saw that refund, and its
   * `retryAfterMs` may be stale: nothing is recorded, the next check goes to the store. Found by an
   * attack review: a check in flight while its user's one unit was refunded came back refused and
   * was cached for 60 s, though the store held no unit of the user any more.
   */
  refuse(key: string, retryAfterMs: number, resetMs: number, sentAt = this.#forgets): void {
    if (sentAt !== this.#forgets && this.#forgottenSince(key, sentAt)) return;
    const now = this.#now();
    // Re-inserted, so the Map's order is the order of the latest refusals: the first is the oldest.
    this.#entries.delete(key);
    this.#entries.set(key, { until: now + retryAfterMs, resetAt: now + resetMs });
    if (this.#entries.size > this.#size) {
      const oldest = this.#entries.keys().next();
      if (oldest.done !== true) this.#entries.delete(oldest.value);
    }
  }

  /** Forgets `key` (a unit was refunded: the store may admit sooner than it said). */
  forget(key: string): void {
    this.#recent[this.#forgets % recentForgets] = key;
    this.#forgets++;
    this.#entries.delete(key);
  }

  /**
   * Whether `key` was forgotten after the epoch `sentAt` (or may have been: more forgets since
   * than are remembered). Only this key's refunds make its refusal stale: compared by one
   * counter of every refund, a refusal in flight across any other user's refund was not cached,
   * and on a busy host (refunds all the time) a hammering user reached the store on every
   * attempt (found by a review: 11 checks of 11 where 2 reach it;
   * test/refusal-cache-other-refunds.test.ts).
   */
  #forgottenSince(key: string, sentAt: number): boolean {
    if (this.#forgets - sentAt > recentForgets) return true;
    for (let at = sentAt; at < this.#forgets; at++) {
      if (this.#recent[at % recentForgets] === key) return true;
    }
    return false;
  }

  /** Keys currently held (expired ones included until looked up or evicted). */
  get size(): number {
    return this.#entries.size;
  }
}
