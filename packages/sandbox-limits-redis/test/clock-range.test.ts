// Every time value is range-checked before it reaches a script or the memory store: a clock that
// read 1e300 once let 20 of 20 checks through a limit of 3. Each reading below is given to a Redis
// store with `clock: 'host'` (as this host's clock) and to a memory store (as its `now`); the
// table says, independently of the code, which readings are refused (the store then times the
// call by its own clock, logs once, and answers `clockFallback: true`) and which are used as a
// skew. Either way the store alone, and a guard on it, admit exactly 3 of 20 checks against a
// limit of 3, and 2 of 5 leases against a cap of 2.
import { randomUUID } from 'node:crypto';
import type { SandboxValidationError } from '@coda/sandbox-core';
import { afterAll, describe, expect, it } from 'vitest';
import { hostWallNow } from '../src/clock/host-clock.ts';
import {
  createConcurrencyGuard,
  createMemoryLimitStore,
  createRateLimitGuard,
  type LimitStore,
} from '../src/index.ts';
import { type Backend, ioredisBackend } from './backends.ts';
import { refusal } from './refusal.ts';
import { warningRecorder } from './warning-recorder.ts';

const day = 86_400_000;
/** Each reading, and whether the stores must refuse it (10 years either side of now is sane). */
const readings: { label: string; read: () => unknown; refused: boolean }[] = [
  { label: '1e300', read: () => 1e300, refused: true },
  { label: 'NaN', read: () => Number.NaN, refused: true },
  { label: 'a string of a valid time', read: () => String(hostWallNow()), refused: true },
  { label: 'a negative number', read: () => -hostWallNow(), refused: true },
  { label: 'Infinity', read: () => Number.POSITIVE_INFINITY, refused: true },
  { label: '-Infinity', read: () => Number.NEGATIVE_INFINITY, refused: true },
  { label: 'the last valid Date (8.64e15)', read: () => 8.64e15, refused: true },
  { label: 'undefined', read: () => undefined, refused: true },
  { label: 'a day ahead', read: () => hostWallNow() + day, refused: false },
  { label: 'an hour back', read: () => hostWallNow() - 3_600_000, refused: false },
  { label: 'eleven years ahead', read: () => hostWallNow() + 11 * 365 * day, refused: true },
  { label: 'nine years back', read: () => hostWallNow() - 9 * 365 * day, refused: false },
];

const backends: Backend[] = [];
afterAll(() => Promise.all(backends.map((backend) => backend.close())));

async function admittedRate(store: LimitStore) {
  // Without the refusal cache, so that every check reaches the store and its clock.
  const guard = createRateLimitGuard({
    store,
    limit: 3,
    windowMs: 60_000,
    timeoutMs: 10_000,
    refusalCache: 0,
  });
  const userId = randomUUID();
  const flags: (boolean | undefined)[] = [];
  let admitted = 0;
  for (let i = 0; i < 20; i++) {
    const answer = await guard
      .acquire({ executionId: randomUUID(), userId })
      .then((lease) => ({ ok: true as const, lease }))
      .catch((error: unknown) => ({ ok: false as const, error }));
    if (answer.ok) {
      admitted++;
      flags.push(answer.lease.decision?.clockFallback);
    } else {
      const error = await refusal(Promise.reject(answer.error));
      expect(error.code).toBe('RATE_LIMITED');
      flags.push(error.details?.clockFallback as boolean | undefined);
    }
  }
  return { admitted, flags };
}

/** The store alone (a guard's ledger would hide what the store admits): 20 checks on one key. */
async function admittedByStore(store: LimitStore) {
  const key = `rate:{=${randomUUID()}}`;
  const rule = { limit: 3, windowMs: 60_000, burst: 3 };
  let admitted = 0;
  for (let i = 0; i < 20; i++) if ((await store.rateLimit(key, rule)).allowed) admitted++;
  const leaseKey = `conc:{=${randomUUID()}}`;
  let leases = 0;
  for (let i = 0; i < 5; i++) {
    if ((await store.acquireLease(leaseKey, randomUUID(), 2, 60_000)).allowed) leases++;
  }
  return { admitted, leases };
}

async function admittedLeases(store: LimitStore) {
  const guard = createConcurrencyGuard({ store, maxPerUser: 2, timeoutMs: 10_000 });
  const userId = randomUUID();
  const results = await Promise.allSettled(
    Array.from({ length: 5 }, () => guard.acquire({ executionId: randomUUID(), userId })),
  );
  const leases = results.flatMap((result) => (result.status === 'fulfilled' ? [result.value] : []));
  const refusals = results.flatMap((result) =>
    result.status === 'rejected' ? [result.reason as { details?: Record<string, unknown> }] : [],
  );
  await Promise.all(leases.map((lease) => lease.release()));
  return { admitted: leases.length, refusals };
}

describe.each([{ kind: 'Redis, clock host' }, { kind: 'memory, now option' }])(
  '$kind: a clock reading',
  ({ kind }) => {
    it.each(readings)('$label', async ({ read, refused }) => {
      const { warnings, logger } = warningRecorder();
      let store: LimitStore;
      if (kind === 'memory, now option') {
        store = createMemoryLimitStore({ now: read as () => number, logger });
      } else {
        const backend = await ioredisBackend(undefined, 'host');
        backends.push(backend);
        store = backend.store(read, logger);
      }
      expect(await admittedByStore(store)).toEqual({ admitted: 3, leases: 2 });
      const rate = await admittedRate(store);
      expect(rate.admitted).toBe(3);
      expect(rate.flags).toEqual(Array.from({ length: 20 }, () => (refused ? true : undefined)));
      const leases = await admittedLeases(store);
      expect(leases.admitted).toBe(2);
      for (const each of leases.refusals) {
        expect(each.details?.clockFallback).toBe(refused ? true : undefined);
      }
      // Logged once per store, however many readings were refused.
      expect(warnings.filter((line) => line.includes('own clock instead'))).toHaveLength(
        refused ? 1 : 0,
      );
    });
  },
);

/** Durations a store may be called with directly, each refused (the guards validate their own). */
const badDurations: { label: string; value: unknown }[] = [
  { label: '1e300', value: 1e300 },
  { label: 'NaN', value: Number.NaN },
  { label: 'Infinity', value: Number.POSITIVE_INFINITY },
  { label: 'negative', value: -1 },
  { label: 'zero', value: 0 },
  { label: 'a fraction', value: 1.5 },
  { label: 'a string', value: '60000' },
];

describe.each([{ kind: 'Redis' }, { kind: 'memory' }])(
  '$kind store: a window or TTL',
  ({ kind }) => {
    it.each(badDurations)('$label is refused with VALIDATION naming it', async ({ value }) => {
      let store: LimitStore;
      if (kind === 'memory') store = createMemoryLimitStore();
      else {
        const backend = await ioredisBackend();
        backends.push(backend);
        store = backend.store();
      }
      const key = `k:{=${randomUUID()}}`;
      const rule = { limit: 3, windowMs: value as number, burst: 3 };
      for (const call of [store.rateLimit(key, rule), store.refundRate(key, rule)]) {
        const error = await refusal(call);
        expect(error.code).toBe('VALIDATION');
        expect((error as SandboxValidationError).issues[0]?.path).toBe('windowMs');
      }
      for (const call of [
        store.claimBudget(key, 'm', 1, value as number),
        store.acquireLease(key, 'm', 1, value as number),
      ]) {
        const error = await refusal(call);
        expect(error.code).toBe('VALIDATION');
        expect((error as SandboxValidationError).issues[0]?.path).toBe('ttlMs');
      }
    });
  },
);
