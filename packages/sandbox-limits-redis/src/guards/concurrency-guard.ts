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
import type { LeaseDecision, LimitStore } from '../store/limit-store.ts';
import { checkContext, lease, refusalWithoutStack, requiredId } from './admission.ts';
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
  maxGlobal?: number | undefined;
  /**
   * Milliseconds a lease lives without renewal: how long a crashed holder's slot stays taken.
   * Default 15 000; 100 ms to 1 hour.
   */
  leaseTtlMs?: number | undefined;
  /** Milliseconds between renewals while an execution runs; default a third of `leaseTtlMs`. */
  renewEveryMs?: number | undefined;
  /** An execution without `userId`: `refuse` (default, `VALIDATION`) or `allow` (global cap only). */
  whenNoUser?: 'refuse' | 'allow' | undefined;
}

/** The lease of an admitted execution; release it when the execution ends. */
export interface ConcurrencyLease extends GuardLease {
  /** The holder id written to the store (random per acquisition). */
  readonly leaseId: string;
  /**
   * True when a slot was taken on this host's insurance store (`failMode: 'insurance'`, the
   * store down): it is renewed and released there, and counts on this host only.
   */
  readonly insured: boolean;
}

/** The concurrency guard; `acquire` resolves with a {@link ConcurrencyLease}. */
export interface ConcurrencyGuard extends ExecutionGuard {
  acquire(context: ExecutionContext, signal?: AbortSignal): Promise<ConcurrencyLease>;
}

/** Validates {@link ConcurrencyGuardOptions}. */
export const ConcurrencyGuardOptionsSchema = z
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

/** A slot this acquisition holds, and on which store. */
interface HeldSlot {
  slot: Slot;
  /** Taken on the insurance store: renewed and released there, never on the shared store. */
  insured: boolean;
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
  const { name, leaseTtlMs, logger } = settings;
  const warn = createWarner(logger, name);
  const callStore = createStoreCaller(settings, warn);
  const renewEveryMs = settings.renewEveryMs ?? Math.max(1, Math.floor(leaseTtlMs / 3));
  const globalSlot: Slot | undefined =
    settings.maxGlobal === undefined
      ? undefined
      : { key: `${name}:conc:{*}`, limit: settings.maxGlobal, scope: 'global' };

  const { insurance } = callStore;
  const giveBack = ({ slot, insured }: HeldSlot, leaseId: string): Promise<void> => {
    if (insured) return insurance?.releaseLease(slot.key, leaseId) ?? Promise.resolve();
    return callStore('releaseLease', (current) => current.releaseLease(slot.key, leaseId)).then(
      () => {},
      (error: unknown) =>
        warn('release', { err: String(error) }, `${name}: could not release a lease`),
    );
  };

  /** Takes `slot`: the slot held (and where), undefined when failed open, or a refusal thrown. */
  async function take(
    slot: Slot,
    leaseId: string,
    signal?: AbortSignal,
  ): Promise<HeldSlot | undefined> {
    const outcome = await callStore(
      'acquireLease',
      (current) => current.acquireLease(slot.key, leaseId, slot.limit, leaseTtlMs),
      signal,
      // Admitted after we stopped waiting (timeout, abort): nobody will release it, so we do.
      (late) => {
        if (late.allowed) void giveBack({ slot, insured: false }, leaseId);
      },
    );
    if (!outcome.ok) return undefined;
    if (outcome.value.allowed) return { slot, insured: outcome.insured };
    const message = `${name}: ${slot.limit} executions already in flight ${slot.scope === 'user' ? 'for this user' : 'in total'}`;
    throw refusalWithoutStack(
      () =>
        new SandboxRateLimitedError(message, {
          retryAfterMs: outcome.value.retryAfterMs,
          details: {
            guard: name,
            scope: slot.scope,
            limit: slot.limit,
            held: outcome.value.held,
            ...(outcome.insured ? { insured: true } : {}),
          },
        }),
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
      const held: HeldSlot[] = [];
      try {
        for (const slot of slots) {
          const taken = await take(slot, leaseId, signal);
          if (taken !== undefined) held.push(taken);
        }
      } catch (error) {
        await Promise.all(held.map((each) => giveBack(each, leaseId)));
        throw error;
      }
      const renewal = held.length === 0 ? undefined : startRenewal(held, leaseId);
      const insured = held.some((each) => each.insured);
      return lease({ leaseId, insured }, async () => {
        // A renewal still in flight could re-add the lease after its removal: let it land first.
        await renewal?.stop();
        await Promise.all(held.map((each) => giveBack(each, leaseId)));
      });
    },
  };

  function startRenewal(held: HeldSlot[], leaseId: string) {
    let inFlight: Promise<unknown> = Promise.resolve();
    const checkKept = (slot: Slot, decision: LeaseDecision | undefined) => {
      if (decision !== undefined && !decision.allowed) {
        warn(
          'lost',
          { scope: slot.scope },
          `${name}: a running execution lost its lease (it expired and the cap filled)`,
        );
      }
    };
    const failed = (error: unknown) =>
      warn('renew', { err: String(error) }, `${name}: lease renewal failed`);
    // A lease stays on the store it was taken on: an insured one is renewed on the insurance
    // store, and a shared one is not moved there when a renewal fails (it would never be released).
    const renew = ({ slot, insured }: HeldSlot): Promise<void> => {
      const renewOn = (current: LimitStore) =>
        current.acquireLease(slot.key, leaseId, slot.limit, leaseTtlMs);
      if (insured && insurance !== undefined) {
        return renewOn(insurance).then((decision) => checkKept(slot, decision), failed);
      }
      return callStore('renewLease', (current) =>
        current === insurance ? Promise.resolve(undefined) : renewOn(current),
      ).then((outcome) => {
        if (outcome.ok) checkKept(slot, outcome.value);
      }, failed);
    };
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
