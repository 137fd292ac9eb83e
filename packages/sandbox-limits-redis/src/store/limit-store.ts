// The operations every limit needs, as one interface the Redis and in-memory backends both
// implement with the same semantics, so guards never know which one they talk to.

/** What a rate-limit check answered. Times are milliseconds from now, measured by the store. */
export interface RateLimitDecision {
  /** Whether this check was admitted (and consumed one unit). */
  allowed: boolean;
  /** Checks that would still be admitted right now, after this one. */
  remaining: number;
  /** Milliseconds until the bucket is full again (every unit back). */
  resetMs: number;
  /** Milliseconds until the next check can be admitted; 0 when this one was. */
  retryAfterMs: number;
  /**
   * Set by a guard with `failMode: 'insurance'` when its store failed and its own in-memory store
   * answered instead (this host alone enforced the limit). Absent otherwise.
   */
  insured?: true;
  /**
   * The clock the store was given read a value it could not use (not a finite number within 10
   * years of this host's monotonic clock), so this answer was timed by the store's own clock:
   * Redis `TIME` for a Redis store with `clock: 'host'`, the monotonic clock for a memory store
   * with a `now` option. Logged once per store. Absent otherwise.
   */
  clockFallback?: true;
}

/** The figures of a rate rule: `limit` per `windowMs` sustained, bursts up to `burst`. */
export interface RateRule {
  /** Checks admitted per `windowMs`, sustained. */
  limit: number;
  /** The window `limit` applies to, in milliseconds. */
  windowMs: number;
  /** Checks admitted at once after an idle period. */
  burst: number;
}

/** What a turn-budget claim answered. */
export interface BudgetDecision {
  /** Whether the execution may run (newly counted, or already counted before). */
  allowed: boolean;
  /** Executions counted against the turn after this claim. */
  used: number;
  /** Milliseconds until the turn's budget record expires (and the budget with it). */
  resetMs: number;
  /** True when the same execution id had already been counted (a retry). */
  alreadyCounted: boolean;
  /** As {@link RateLimitDecision.insured}: this host's insurance store answered. */
  insured?: true;
  /** As {@link RateLimitDecision.clockFallback} (only a memory store's `now` times budgets). */
  clockFallback?: true;
}

/** What a lease acquisition (or renewal) answered. */
export interface LeaseDecision {
  /** Whether the holder now has a slot. */
  allowed: boolean;
  /** Slots held after this call (live leases only). */
  held: number;
  /**
   * When refused: milliseconds until enough leases expire, unless renewed, for one slot to free
   * (the oldest lease's expiry when the set is at the cap; later when it holds more); else 0.
   */
  retryAfterMs: number;
  /** As {@link RateLimitDecision.clockFallback}. */
  clockFallback?: true;
}

/**
 * A backend for the limits: {@link createRedisLimitStore} (shared by every host) or
 * {@link createMemoryLimitStore} (one process). Keys are logical; the store adds its prefix.
 * Every key a store writes expires on its own.
 */
export interface LimitStore {
  /** `redis` or `memory`, for logs. */
  readonly kind: string;
  /** GCRA rate check on `key`: consumes one unit when admitted, nothing when refused. */
  rateLimit(key: string, rule: RateRule): Promise<RateLimitDecision>;
  /**
   * Gives back what is left of one unit that `rateLimit` took on `key` (the execution never ran):
   * `unitLeftMs` is the admission's `resetMs` minus the time since it was asked for (the guards
   * pass it); nothing once that has passed, at most one interval. Without it, one interval: exact
   * only while the bucket stayed drained since the admission.
   */
  refundRate(key: string, rule: RateRule, unitLeftMs?: number): Promise<void>;
  /**
   * Counts `member` against the budget `key` of at most `limit` members, once: a member counted
   * before is admitted again without counting. The record expires `ttlMs` after its first member.
   */
  claimBudget(key: string, member: string, limit: number, ttlMs: number): Promise<BudgetDecision>;
  /**
   * Takes (or renews) the slot `member` in the lease set `key` of at most `limit` live leases,
   * each expiring `ttlMs` from now unless renewed. Expired leases are dropped first.
   */
  acquireLease(key: string, member: string, limit: number, ttlMs: number): Promise<LeaseDecision>;
  /** Gives the slot back. Resolves whether or not it was still held. */
  releaseLease(key: string, member: string): Promise<void>;
}
