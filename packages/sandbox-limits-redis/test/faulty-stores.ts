// Memory stores with one fault each, for the ledger tests: one that forgets everything at once
// (what a Redis restart without persistence or a failover to a replica that missed the writes
// does) and one whose first answer to an operation comes back late. Real memory stores
// underneath; only the fault is added.
import { setTimeout as sleep } from 'node:timers/promises';
import type { LimitStore } from '../src/store/limit-store.ts';
import { createMemoryLimitStore } from '../src/store/memory-store.ts';

/** A memory store behind a handle: `forget()` swaps in an empty one; `calls` counts checks. */
export function forgetfulStore() {
  let current = createMemoryLimitStore();
  const calls = { rateLimit: 0 };
  const store: LimitStore = {
    kind: 'memory',
    rateLimit: (...args) => {
      calls.rateLimit++;
      return current.rateLimit(...args);
    },
    refundRate: (...args) => current.refundRate(...args),
    claimBudget: (...args) => current.claimBudget(...args),
    acquireLease: (...args) => current.acquireLease(...args),
    releaseLease: (...args) => current.releaseLease(...args),
  };
  return {
    store,
    calls,
    forget: () => {
      current = createMemoryLimitStore();
    },
  };
}

/**
 * A memory store whose first answer to `operation` arrives `delayMs` after the store gave it
 * (counted at once, answered late: a slow link, or a host under load); later answers at once.
 */
export function lateFirstAnswer(operation: 'rateLimit' | 'claimBudget', delayMs: number) {
  const backing = createMemoryLimitStore();
  let delay = delayMs;
  const late = async <T>(answer: Promise<T>): Promise<T> => {
    const value = await answer;
    const wait = delay;
    delay = 0;
    await sleep(wait);
    return value;
  };
  const store: LimitStore =
    operation === 'rateLimit'
      ? { ...backing, kind: 'memory', rateLimit: (...args) => late(backing.rateLimit(...args)) }
      : {
          ...backing,
          kind: 'memory',
          claimBudget: (...args) => late(backing.claimBudget(...args)),
        };
  return store;
}
