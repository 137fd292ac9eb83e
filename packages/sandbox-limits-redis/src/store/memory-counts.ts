// The in-memory counts behind the memory store and each guard's host ledger: the arithmetic of the
// Redis scripts, synchronous, for one process. Entries expire like Redis keys and are swept lazily.
import { withClockFallback } from '../clock/time-check.ts';
import type { BudgetDecision, LeaseDecision, RateLimitDecision, RateRule } from './limit-store.ts';

/** A live entry and its milliseconds to live, as Redis's KEYS and PTTL list them. */
export interface MemoryEntry {
  key: string;
  pttl: number;
}

/** A time to count by, and whether it is the fallback clock (the given one was refused). */
export interface Reading {
  now: number;
  fellBack: boolean;
}

/** The operations of a {@link LimitStore}, answered synchronously, plus what the guards need. */
export interface MemoryCounts {
  /**
   * As {@link LimitStore.rateLimit}; `toleranceMs` admits a check that early (the guard's ledger
   * counting what the shared store admitted: see rate-limit-guard.ts). Default 0.
   */
  rateLimit(key: string, rule: RateRule, toleranceMs?: number): RateLimitDecision;
  refundRate(key: string, rule: RateRule, unitLeftMs?: number): void;
  /**
   * As {@link LimitStore.claimBudget}; `endsWithinMs` (a guard's ledger counting what the shared
   * store admitted: see turn-budget-guard.ts) ends a record that would live longer sooner.
   */
  claimBudget(
    key: string,
    member: string,
    limit: number,
    ttlMs: number,
    endsWithinMs?: number,
  ): BudgetDecision;
  acquireLease(key: string, member: string, limit: number, ttlMs: number): LeaseDecision;
  releaseLease(key: string, member: string): void;
  /** Every live entry, for tests. */
  entries(): MemoryEntry[];
}

interface Expiring {
  expiresAt: number;
}
interface RateEntry extends Expiring {
  tat: number;
}
interface BudgetEntry extends Expiring {
  members: Set<string>;
}
interface LeaseEntry extends Expiring {
  holders: Map<string, number>;
}

const sweepEveryMs = 1_000;

/**
 * Counts in this process's memory, timed by `read` (already checked: see time-check.ts). A rate
 * entry is kept a window after its last admission, as the Redis script keeps its key, unless
 * `rateKeptUntilFull` is set (a guard's ledger): it then goes as soon as the bucket is full again,
 * which means the same as no entry, so a ledger holds only users still partly drained (measured:
 * about 370 bytes per entry with 45-character keys).
 */
export function createMemoryCounts(read: () => Reading, rateKeptUntilFull = false): MemoryCounts {
  const rates = new Map<string, RateEntry>();
  const budgets = new Map<string, BudgetEntry>();
  const leases = new Map<string, LeaseEntry>();
  const maps: Map<string, Expiring>[] = [rates, budgets, leases];
  let lastSweep = read().now;

  /** The current time, after dropping every expired entry at most once a second. */
  function tick(): Reading {
    const reading = read();
    const { now } = reading;
    if (Math.abs(now - lastSweep) >= sweepEveryMs) {
      lastSweep = now;
      for (const map of maps) {
        for (const [key, entry] of map) if (entry.expiresAt <= now) map.delete(key);
      }
    }
    return reading;
  }

  function live<Entry extends Expiring>(map: Map<string, Entry>, key: string, now: number) {
    const entry = map.get(key);
    if (entry === undefined || entry.expiresAt > now) return entry;
    map.delete(key);
    return undefined;
  }

  return {
    rateLimit(key, rule, toleranceMs = 0) {
      const reading = tick();
      const { now } = reading;
      const interval = rule.windowMs / rule.limit;
      const tolerance = interval * rule.burst;
      const entry = live(rates, key, now);
      const tat = Math.max(entry?.tat ?? now, now);
      const nextTat = tat + interval;
      const allowAt = nextTat - tolerance;
      if (now + toleranceMs < allowAt) {
        // Admission never later than the entry's end, as in the Redis script (scripts.ts).
        const lives = (entry?.expiresAt ?? tat) - now;
        const wait = Math.min(tat - now, lives + tolerance - interval);
        return withClockFallback(
          {
            allowed: false,
            remaining: 0,
            resetMs: Math.ceil(wait),
            retryAfterMs: Math.max(1, Math.ceil(wait + interval - tolerance)),
          },
          reading.fellBack,
        );
      }
      const resetMs = Math.max(1, Math.ceil(nextTat - now));
      const keptMs = rateKeptUntilFull ? nextTat - now : Math.max(resetMs, rule.windowMs);
      rates.set(key, { tat: nextTat, expiresAt: now + keptMs });
      // With a tolerance, what it would still admit with that tolerance (at least 0).
      const remaining = Math.max(0, Math.floor((now + toleranceMs - allowAt) / interval + 1e-6));
      return withClockFallback(
        { allowed: true, remaining, resetMs, retryAfterMs: 0 },
        reading.fellBack,
      );
    },
    refundRate(key, rule, unitLeftMs) {
      const { now } = tick();
      const entry = live(rates, key, now);
      if (entry === undefined) return;
      // What is left of the unit, at most an interval: as the Redis script (scripts.ts).
      const interval = rule.windowMs / rule.limit;
      const back = Math.min(interval, Math.max(0, unitLeftMs ?? interval));
      if (back <= 0) return;
      entry.tat -= back;
      if (entry.tat <= now) rates.delete(key);
    },
    claimBudget(key, member, limit, ttlMs, endsWithinMs) {
      const reading = tick();
      const { now } = reading;
      const entry = live(budgets, key, now);
      if (entry !== undefined && endsWithinMs !== undefined) {
        entry.expiresAt = Math.min(entry.expiresAt, now + endsWithinMs);
      }
      const resetMs = entry === undefined ? 0 : Math.max(0, Math.ceil(entry.expiresAt - now));
      const used = entry?.members.size ?? 0;
      if (entry?.members.has(member)) {
        return withClockFallback(
          { allowed: true, used, resetMs, alreadyCounted: true },
          reading.fellBack,
        );
      }
      if (used >= limit)
        return withClockFallback(
          { allowed: false, used, resetMs, alreadyCounted: false },
          reading.fellBack,
        );
      if (entry === undefined) {
        budgets.set(key, { members: new Set([member]), expiresAt: now + ttlMs });
        return withClockFallback(
          { allowed: true, used: 1, resetMs: ttlMs, alreadyCounted: false },
          reading.fellBack,
        );
      }
      entry.members.add(member);
      return withClockFallback(
        { allowed: true, used: used + 1, resetMs, alreadyCounted: false },
        reading.fellBack,
      );
    },
    acquireLease(key, member, limit, ttlMs) {
      const reading = tick();
      const now = Math.floor(reading.now);
      const holders = live(leases, key, now)?.holders ?? new Map<string, number>();
      for (const [holder, expiresAt] of holders) if (expiresAt <= now) holders.delete(holder);
      const mine = holders.has(member);
      if (!mine && holders.size >= limit) {
        // A slot frees once held - limit + 1 leases have expired, as in the Redis script.
        const expiries = [...holders.values()].sort((a, b) => a - b);
        const freeing = expiries[holders.size - limit] ?? now;
        return withClockFallback(
          { allowed: false, held: holders.size, retryAfterMs: Math.max(1, freeing - now) },
          reading.fellBack,
        );
      }
      holders.set(member, now + ttlMs);
      leases.set(key, { holders, expiresAt: Math.max(...holders.values()) });
      return withClockFallback(
        { allowed: true, held: holders.size, retryAfterMs: 0 },
        reading.fellBack,
      );
    },
    releaseLease(key, member) {
      const entry = leases.get(key);
      if (entry === undefined) return;
      entry.holders.delete(member);
      if (entry.holders.size === 0) leases.delete(key);
    },
    entries() {
      const { now } = read();
      return maps.flatMap((map) =>
        [...map].flatMap(([key, entry]) =>
          entry.expiresAt > now ? [{ key, pttl: entry.expiresAt - now }] : [],
        ),
      );
    },
  };
}
