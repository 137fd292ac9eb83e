// Concurrency caps: at most K executions in flight per user (and optionally globally), held as
// leases that are renewed while the execution runs and expire if their holder dies.
import { randomUUID } from 'node:crypto';
import {
  type ExecutionContext,
  type ExecutionGuard,
  type GuardLease,
  SandboxRateLimitedError,
  validate,
} from '@coda/sandbox-core';
import { z } from 'zod';
import { hashTag, keyPart } from '../keys/key-part.ts';
import { checkContext, lease, requiredId } from './admission.ts';
import {
  count,
  type GuardOptions,
  guardOptionsShape,
  millis,
  whenMissingSchema,
} from './guard-options.ts';
import { createStoreCaller } from './store-call.ts';
import { createWarner } from './warnings.ts';

/** Options of {@link createConcurrencyGuard}. */
export interface ConcurrencyGuardOptions extends GuardOptions {
  /** Executions one user may have in flight at once (1 to 100 000). */
  maxPerUser: number;
  /** Executions in flight at once over all users and hosts; default no global cap. */
  maxGlobal?: number;
  /**
   * Milliseconds a lease lives without renewal: how long a crashed holder's slot stays taken.
   * Default 15 000; 100 ms to 1 hour.
   */
  leaseTtlMs?: number;
  /** Milliseconds between renewals while an execution runs; default a third of `leaseTtlMs`. */
  renewEveryMs?: number;
  /** An execution without `userId`: `refuse` (default, `VALIDATION`) or `allow` (global cap only). */
  whenNoUser?: 'refuse' | 'allow';
}

/** The lease of an admitted execution; release it when the execution ends. */
export interface ConcurrencyLease extends GuardLease {
  /** The holder id written to the store (random per acquisition). */
  readonly leaseId: string;
}

/** The concurrency guard; `acquire` resolves with a {@link ConcurrencyLease}. */
export interface ConcurrencyGuard extends ExecutionGuard {
  acquire(context: ExecutionContext, signal?: AbortSignal): Promise<ConcurrencyLease>;
}

const ConcurrencyGuardOptionsSchema = z
  .strictObject({
    ...guardOptionsShape('concurrency'),
    maxPerUser: count(100_000),
    maxGlobal: count(10_000_000).optional(),
    leaseTtlMs: millis(3_600_000).min(100).default(15_000),
    renewEveryMs: millis(3_600_000).optional(),
    whenNoUser: whenMissingSchema,
  })
  .refine((options) => (options.renewEveryMs ?? 0) < options.leaseTtlMs, {
    message: 'must be shorter than leaseTtlMs, or the lease expires between renewals',
    path: ['renewEveryMs'],
  });

interface Slot {
  key: string;
  limit: number;
  scope: 'user' | 'global';
}

/**
 * Caps executions in flight: `maxPerUser` per user and, if set, `maxGlobal` over everyone, across
 * every host that shares the store. Each admitted execution holds a lease that is renewed every
 * `renewEveryMs` until released; a holder that dies loses it after `leaseTtlMs`, so no slot is
 * lost to a crash. Refuses with `RATE_LIMITED` (`details.scope` says which cap) and `retryAfterMs`
 * (when the oldest lease expires if nobody renews it: an upper bound).
 */
export function createConcurrencyGuard(options: ConcurrencyGuardOptions): ConcurrencyGuard {
  const settings = validate(ConcurrencyGuardOptionsSchema, options, 'concurrency guard options');
  const { name, store, leaseTtlMs, logger } = settings;
  const warn = createWarner(logger, name);
  const callStore = createStoreCaller(settings, warn);
  const renewEveryMs = settings.renewEveryMs ?? Math.max(1, Math.floor(leaseTtlMs / 3));
  const globalSlot: Slot | undefined =
    settings.maxGlobal === undefined
      ? undefined
      : { key: `${name}:conc:{*}`, limit: settings.maxGlobal, scope: 'global' };

  const giveBack = (slot: Slot, leaseId: string) =>
    callStore('releaseLease', () => store.releaseLease(slot.key, leaseId)).then(
      () => {},
      (error: unknown) =>
        warn('release', { err: String(error) }, `${name}: could not release a lease`),
    );

  async function take(slot: Slot, leaseId: string, signal?: AbortSignal): Promise<boolean> {
    const outcome = await callStore(
      'acquireLease',
      () => store.acquireLease(slot.key, leaseId, slot.limit, leaseTtlMs),
      signal,
      // Admitted after we stopped waiting (timeout, abort): nobody will release it, so we do.
      (late) => {
        if (late.allowed) void giveBack(slot, leaseId);
      },
    );
    if (!outcome.ok) return false;
    if (outcome.value.allowed) return true;
    throw new SandboxRateLimitedError(
      `${name}: ${slot.limit} executions already in flight ${slot.scope === 'user' ? 'for this user' : 'in total'}`,
      {
        retryAfterMs: outcome.value.retryAfterMs,
        details: { guard: name, scope: slot.scope, limit: slot.limit, held: outcome.value.held },
      },
    );
  }

  return {
    name,
    async acquire(context, signal) {
      const parsed = checkContext(context, name);
      const userId = requiredId(parsed, 'userId', settings.whenNoUser, name);
      const slots: Slot[] = [];
      if (userId !== undefined) {
        const key = `${name}:conc:${hashTag(keyPart(userId))}`;
        slots.push({ key, limit: settings.maxPerUser, scope: 'user' });
      }
      if (globalSlot !== undefined) slots.push(globalSlot);
      const leaseId = randomUUID();
      // Each cap is its own key (its own cluster slot), so they are taken one after the other.
      const held: Slot[] = [];
      try {
        for (const slot of slots) if (await take(slot, leaseId, signal)) held.push(slot);
      } catch (error) {
        await Promise.all(held.map((slot) => giveBack(slot, leaseId)));
        throw error;
      }
      const renewal = held.length === 0 ? undefined : startRenewal(held, leaseId);
      return lease({ leaseId }, async () => {
        // A renewal still in flight could re-add the lease after its removal: let it land first.
        await renewal?.stop();
        await Promise.all(held.map((slot) => giveBack(slot, leaseId)));
      });
    },
  };

  function startRenewal(held: Slot[], leaseId: string) {
    let inFlight: Promise<unknown> = Promise.resolve();
    const renew = (slot: Slot) =>
      callStore('renewLease', () =>
        store.acquireLease(slot.key, leaseId, slot.limit, leaseTtlMs),
      ).then(
        (outcome) => {
          if (outcome.ok && !outcome.value.allowed) {
            warn(
              'lost',
              { scope: slot.scope },
              `${name}: a running execution lost its lease (it expired and the cap filled)`,
            );
          }
        },
        (error: unknown) => warn('renew', { err: String(error) }, `${name}: lease renewal failed`),
      );
    const timer = setInterval(() => {
      inFlight = Promise.all([inFlight, ...held.map(renew)]);
    }, renewEveryMs);
    // A renewal timer must not keep the host alive on its own.
    timer.unref();
    return {
      stop: () => {
        clearInterval(timer);
        return inFlight;
      },
    };
  }
}
