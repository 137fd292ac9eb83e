// The in-memory backend: the same operations and answers as the Redis scripts, for one process
// (tests, the demo's zero-setup default), and the view of a guard's host ledger that answers as
// its insurance store.
import { type Logger, silentLogger, validate } from '@coda/sandbox-core';
import { z } from 'zod';
import { monotonicNow } from '../clock/host-clock.ts';
import { checkedClock } from '../clock/time-check.ts';
import { loggerSchema } from '../guards/guard-options.ts';
import type { LimitStore } from './limit-store.ts';
import { createMemoryCounts, type MemoryCounts, type MemoryEntry } from './memory-counts.ts';
import { checkLimitAndTtl, checkRule } from './store-arguments.ts';

export type { MemoryEntry } from './memory-counts.ts';

/** Options of {@link createMemoryLimitStore}. */
export interface MemoryLimitStoreOptions {
  /**
   * Milliseconds since the epoch; default this process's monotonic clock (captured when the
   * package loaded). Tests may pass a fake one. A reading that is not a finite number within
   * 10 years of the monotonic clock is not used: the store falls back to its monotonic clock for
   * that operation, logs once, and marks the answer `clockFallback: true`.
   */
  now?: (() => number) | undefined;
  /** Where the one warning about a refused `now` reading goes. Default: nothing is logged. */
  logger?: Logger | undefined;
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
  logger: loggerSchema.optional(),
});

/** The monotonic clock as a reading: never refused. */
const monotonicReading = () => ({ now: monotonicNow(), fellBack: false });

/**
 * A {@link LimitStore} in this process's memory, with the semantics of the Redis store. Limits are
 * per process: two hosts each get the full limit. Expired entries never accumulate.
 */
export function createMemoryLimitStore(options: MemoryLimitStoreOptions = {}): LimitStore {
  const { now, logger } = validate(
    MemoryLimitStoreOptionsSchema,
    options,
    'memory limit store options',
  );
  let read = monotonicReading;
  if (now !== undefined) {
    const checked = checkedClock(now, 'the memory store’s now()', logger ?? silentLogger);
    read = () => {
      const time = checked();
      return time === undefined
        ? { now: monotonicNow(), fellBack: true }
        : { now: time, fellBack: false };
    };
  }
  return memoryStoreOf(createMemoryCounts(read));
}

/** Counts timed by this process's monotonic clock: a guard's host ledger. */
export function createLedgerCounts(): MemoryCounts {
  return createMemoryCounts(monotonicReading, true);
}

/** `counts` as a {@link LimitStore} (each answer a resolved promise). */
export function memoryStoreOf(counts: MemoryCounts): LimitStore {
  const store: LimitStore = {
    kind: 'memory',
    async rateLimit(key, rule) {
      checkRule(rule);
      return counts.rateLimit(key, rule);
    },
    async refundRate(key, rule, unitLeftMs) {
      checkRule(rule);
      counts.refundRate(key, rule, unitLeftMs);
    },
    async claimBudget(key, member, limit, ttlMs) {
      checkLimitAndTtl(limit, ttlMs);
      return counts.claimBudget(key, member, limit, ttlMs);
    },
    async acquireLease(key, member, limit, ttlMs) {
      checkLimitAndTtl(limit, ttlMs);
      return counts.acquireLease(key, member, limit, ttlMs);
    },
    async releaseLease(key, member) {
      counts.releaseLease(key, member);
    },
  };
  inspectors.set(store, () => counts.entries());
  return store;
}
