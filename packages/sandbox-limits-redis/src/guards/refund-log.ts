// What a guard gave back per key on this host, recently: a unit's slot moves earlier by every unit
// refunded after it was admitted (the TAT moves back under it), which the unit's own `resetMs`
// does not know. Found by a review: leases taken and refunded in turns kept one each whose
// recorded time ran 10 intervals ahead of its real slot, and refunding them half a window later
// gave back whole intervals that had already refilled: 15 ran where the bound allowed 10.

/** Milliseconds given back, per counter: the shared store's and this host's ledger's. */
export interface UnitTimes {
  store: number;
  ledger: number;
}

interface Entry extends UnitTimes {
  at: number;
}

/**
 * Refunds per key, each kept `keepMs` (a unit admitted longer ago than the burst's span holds no
 * time any more, whatever was refunded since). Times are `performance.now()` readings.
 */
export class RefundLog {
  readonly #byKey = new Map<string, Entry[]>();
  readonly #keepMs: number;
  #sweptAt = performance.now();

  constructor(keepMs: number) {
    this.#keepMs = keepMs;
  }

  /**
   * What was given back on `key` since `since`. Refunds of units admitted after the one asking
   * count too (they did not move its slot): the sum can only make a refund smaller.
   */
  since(key: string, since: number): UnitTimes {
    const entries = this.#live(key);
    const sum = { store: 0, ledger: 0 };
    for (const entry of entries ?? []) {
      if (entry.at <= since) continue;
      sum.store += entry.store;
      sum.ledger += entry.ledger;
    }
    return sum;
  }

  add(key: string, given: UnitTimes): void {
    const now = performance.now();
    const entries = this.#live(key) ?? [];
    entries.push({ at: now, ...given });
    this.#byKey.set(key, entries);
    // Users not seen again are dropped by a sweep of every key, at most once per keepMs.
    if (now - this.#sweptAt >= this.#keepMs) {
      this.#sweptAt = now;
      for (const other of [...this.#byKey.keys()]) this.#live(other);
    }
  }

  /** The key's refunds still kept; the key goes once none is. */
  #live(key: string): Entry[] | undefined {
    const entries = this.#byKey.get(key);
    if (entries === undefined) return undefined;
    const oldest = performance.now() - this.#keepMs;
    const kept = entries.filter((entry) => entry.at > oldest);
    if (kept.length === 0) this.#byKey.delete(key);
    else if (kept.length < entries.length) this.#byKey.set(key, kept);
    return kept;
  }
}
