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
  /** Its place in the order of this log's refunds (see `mark`). */
  seq: number;
}

/**
 * Refunds per key, each kept `keepMs` (a unit admitted longer ago than the burst's span holds no
 * time any more, whatever was refunded since). Times are `performance.now()` readings.
 */
export class RefundLog {
  readonly #byKey = new Map<string, Entry[]>();
  readonly #keepMs: number;
  #sweptAt = performance.now();
  #seq = 0;
  /** Refunds logged whose store part has not been answered yet (see `storeMark`). */
  readonly #inFlight = new Set<number>();

  constructor(keepMs: number) {
    this.#keepMs = keepMs;
  }

  /** The latest refund so far, to pass to `since` later: a counter, no clock read. */
  get mark(): number {
    return this.#seq;
  }

  /**
   * The mark for a check sent to the store now: refunds still in flight to the store count as
   * after it, since they can land after the check (a refund whose EVALSHA finds its script
   * missing is re-sent as EVAL after the NOSCRIPT reply; found by a review: checks sent after
   * such refunds were logged landed first, and their units, refunded once the bucket had refilled,
   * let another host run 14 where 10 were allowed; test/refund-noscript-race.test.ts).
   */
  get storeMark(): number {
    // Added in increasing order, and a Set keeps that order: the first is the oldest.
    const oldest = this.#inFlight.values().next();
    return oldest.done === true ? this.#seq : oldest.value - 1;
  }

  /** The store answered the refund logged as `seq`: it has landed (or never will). */
  landed(seq: number): void {
    this.#inFlight.delete(seq);
  }

  /**
   * What was given back on `key` after the refunds marked `after` (per counter: the store's, the
   * ledger's). A unit's store part is marked when its check was *sent*: a refund logged while
   * the check was in flight may have landed on the store after the unit was counted there, and
   * so moved its slot (found by an attack review: marked on arrival, five units admitted while
   * five earlier ones were refunded each kept the refunds' interval, and once the bucket had
   * refilled gave back 4.4 intervals it no longer held: another host ran 14 where 10 were
   * allowed). Its ledger part, counted on arrival, is marked then. Refunds that did not move
   * the unit count too: the sum can only make a refund smaller.
   */
  since(key: string, after: UnitTimes): UnitTimes {
    const entries = this.#live(key);
    const sum = { store: 0, ledger: 0 };
    for (const entry of entries ?? []) {
      if (entry.seq > after.store) sum.store += entry.store;
      if (entry.seq > after.ledger) sum.ledger += entry.ledger;
    }
    return sum;
  }

  /** Logs a refund; its store part counts as in flight until `landed(seq)`. Returns `seq`. */
  add(key: string, given: UnitTimes): number {
    const now = performance.now();
    const entries = this.#live(key) ?? [];
    const seq = ++this.#seq;
    this.#inFlight.add(seq);
    entries.push({ at: now, seq, ...given });
    this.#byKey.set(key, entries);
    // Users not seen again are dropped by a sweep of every key, at most once per keepMs.
    if (now - this.#sweptAt >= this.#keepMs) {
      this.#sweptAt = now;
      for (const other of [...this.#byKey.keys()]) this.#live(other);
    }
    return seq;
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
