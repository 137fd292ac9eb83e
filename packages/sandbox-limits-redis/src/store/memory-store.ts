// The in-memory backend: the same operations and answers as the Redis scripts, for one process
// (tests, the demo's zero-setup default). Entries expire like Redis keys and are swept lazily.
import { validate } from '@coda/sandbox-core';
import { z } from 'zod';
import type {
  BudgetDecision,
  LeaseDecision,
  LimitStore,
  RateLimitDecision,
  RateRule,
} from './limit-store.ts';

/** Options of {@link createMemoryLimitStore}. */
export interface MemoryLimitStoreOptions {
  /** Milliseconds since the epoch; default a monotonic clock. Tests may pass a fake one. */
  now?: (() => number) | undefined;
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

/** A live entry of a memory store and its milliseconds to live, as Redis's KEYS and PTTL list. */
export interface MemoryEntry {
  key: string;
  pttl: number;
}

// How the tests list a memory store's live entries (not exported from the package).
const inspectors = new WeakMap<LimitStore, () => MemoryEntry[]>();

/** The live entries of a store made by {@link createMemoryLimitStore}, for tests. */
export function memoryEntries(store: LimitStore): MemoryEntry[] {
  const inspect = inspectors.get(store);
  if (inspect === undefined) throw new Error('not a memory limit store');
  return inspect();
}

/** Validates {@link MemoryLimitStoreOptions}. */
export const MemoryLimitStoreOptionsSchema = z.strictObject({
  now: z
    .custom<() => number>((value) => typeof value === 'function', 'expected a function')
    .optional(),
});

/**
 * A {@link LimitStore} in this process's memory, with the semantics of the Redis store. Limits are
 * per process: two hosts each get the full limit. Expired entries never accumulate.
 */
export function createMemoryLimitStore(options: MemoryLimitStoreOptions = {}): LimitStore {
  const { now } = validate(MemoryLimitStoreOptionsSchema, options, 'memory limit store options');
  const clock = now ?? (() => performance.timeOrigin + performance.now());
  const rates = new Map<string, RateEntry>();
  const budgets = new Map<string, BudgetEntry>();
  const leases = new Map<string, LeaseEntry>();
  const maps: Map<string, Expiring>[] = [rates, budgets, leases];
  let lastSweep = clock();

  /** The current time, after dropping every expired entry at most once a second. */
  function tick(): number {
    const now = clock();
    if (now - lastSweep >= sweepEveryMs) {
      lastSweep = now;
      for (const map of maps) {
        for (const [key, entry] of map) if (entry.expiresAt <= now) map.delete(key);
      }
    }
    return now;
  }

  function live<Entry extends Expiring>(map: Map<string, Entry>, key: string, now: number) {
    const entry = map.get(key);
    if (entry === undefined || entry.expiresAt > now) return entry;
    map.delete(key);
    return undefined;
  }

  const store: LimitStore = {
    kind: 'memory',
    async rateLimit(key: string, rule: RateRule): Promise<RateLimitDecision> {
      const now = tick();
      const interval = rule.windowMs / rule.limit;
      const tolerance = interval * rule.burst;
      const tat = Math.max(live(rates, key, now)?.tat ?? now, now);
      const nextTat = tat + interval;
      const allowAt = nextTat - tolerance;
      if (now < allowAt) {
        return {
          allowed: false,
          remaining: 0,
          resetMs: Math.ceil(tat - now),
          retryAfterMs: Math.max(1, Math.ceil(allowAt - now)),
        };
      }
      const resetMs = Math.max(1, Math.ceil(nextTat - now));
      rates.set(key, { tat: nextTat, expiresAt: now + Math.max(resetMs, rule.windowMs) });
      const remaining = Math.floor((now - allowAt) / interval + 1e-6);
      return { allowed: true, remaining, resetMs, retryAfterMs: 0 };
    },
    async refundRate(key: string, rule: RateRule): Promise<void> {
      const now = tick();
      const entry = live(rates, key, now);
      if (entry === undefined) return;
      entry.tat -= rule.windowMs / rule.limit;
      if (entry.tat <= now) rates.delete(key);
    },
    async claimBudget(key, member, limit, ttlMs): Promise<BudgetDecision> {
      const now = tick();
      const entry = live(budgets, key, now);
      const resetMs = entry === undefined ? 0 : Math.max(0, Math.ceil(entry.expiresAt - now));
      const used = entry?.members.size ?? 0;
      if (entry?.members.has(member)) return { allowed: true, used, resetMs, alreadyCounted: true };
      if (used >= limit) return { allowed: false, used, resetMs, alreadyCounted: false };
      if (entry === undefined) {
        budgets.set(key, { members: new Set([member]), expiresAt: now + ttlMs });
        return { allowed: true, used: 1, resetMs: ttlMs, alreadyCounted: false };
      }
      entry.members.add(member);
      return { allowed: true, used: used + 1, resetMs, alreadyCounted: false };
    },
    async acquireLease(key, member, limit, ttlMs): Promise<LeaseDecision> {
      const now = Math.floor(tick());
      const holders = live(leases, key, now)?.holders ?? new Map<string, number>();
      for (const [holder, expiresAt] of holders) if (expiresAt <= now) holders.delete(holder);
      const mine = holders.has(member);
      if (!mine && holders.size >= limit) {
        const oldest = Math.min(...holders.values());
        return { allowed: false, held: holders.size, retryAfterMs: Math.max(1, oldest - now) };
      }
      holders.set(member, now + ttlMs);
      leases.set(key, { holders, expiresAt: Math.max(...holders.values()) });
      return { allowed: true, held: holders.size, retryAfterMs: 0 };
    },
    async releaseLease(key, member): Promise<void> {
      const entry = leases.get(key);
      if (entry === undefined) return;
      entry.holders.delete(member);
      if (entry.holders.size === 0) leases.delete(key);
    },
  };
  inspectors.set(store, () => {
    const now = clock();
    return maps.flatMap((map) =>
      [...map].flatMap(([key, entry]) =>
        entry.expiresAt > now ? [{ key, pttl: entry.expiresAt - now }] : [],
      ),
    );
  });
  return store;
}
