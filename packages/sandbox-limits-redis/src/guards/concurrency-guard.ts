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
   * store down): it counts on this host, and is written back to the shared store (counted there
   * too) at the first renewal the shared store answers.
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
  /**
   * Taken on the insurance store and not yet written back to the shared store: renewed in the
   * ledger, and written back (counted on the shared store) at the first renewal it answers.
   */
  insured: boolean;
  /** Given back (released, or the acquisition failed): a late answer's lease is removed then. */
  givenBack?: boolean;
  /**
   * Insured, but a write of it failed after the shared store may have run it: given back, it is
   * removed from the shared store too.
   */
  mayBeShared?: boolean;
}

/**
 * The limit a write-back is sent with: an insured lease is running already, so the shared store
 * must count it even when its cap is full (it then refuses newcomers until the count drops).
 */
const writeBackLimit = Number.MAX_SAFE_INTEGER;

/**
 * Failed lease removals a guard keeps for retrying (see `removeUntilLanded`); each drops out once
 * its lease would have expired. About 700 bytes each with its lease id and holder (measured):
 * 14 MB at the bound, the removals of 1 300 refused acquisitions a second for a 15 s lease TTL.
 */
const maxRetrying = 20_000;

/** Milliseconds between retries of failed lease removals. */
const retryEveryMs = 100;

/** Failed lease removals sent again at each retry, at most. */
const retryBatch = 1_000;

/**
 * Caps executions in flight: `maxPerUser` per user and, if set, `maxGlobal` over everyone, across
 * every host that shares the store. Each admitted execution holds a lease that is renewed every
 * `renewEveryMs` until released; a holder that dies loses it after `leaseTtlMs`, so no slot is
 * lost to a crash. Each lease is also held in this host's ledger, whichever store granted it, so
 * one host never holds more than the cap (`details.thisHost` when the ledger refused), and leases
 * granted while the store was down are written back to it when it answers again. Refuses with
 * `RATE_LIMITED` (`details.scope` says which cap) and `retryAfterMs` (when a slot frees if
 * nobody renews a lease: an upper bound).
 */
export function createConcurrencyGuard(options: ConcurrencyGuardOptions): ConcurrencyGuard {
  const settings = validate(ConcurrencyGuardOptionsSchema, options, 'concurrency guard options');
  const { name, leaseTtlMs, logger } = settings;
  const warn = createWarner(logger, name);
  const callStore = createStoreCaller(settings, warn);
  const renewEveryMs = settings.renewEveryMs ?? Math.max(1, Math.floor(leaseTtlMs / 3));
  // A renewal sent `renewEveryMs` after the one before may reach the store as late as its answer
  // may come (timeoutMs and the deadline watcher's tick) while that one ran at once: the lease
  // then expired between them and another host took its slot. Accepted (the defaults leave
  // 10 s for 1.1 s), but said once at creation (found by an attack review).
  if (leaseTtlMs - renewEveryMs <= callStore.latestAnswerMs) {
    warn(
      'lease-margin',
      { leaseTtlMs, renewEveryMs, latestAnswerMs: callStore.latestAnswerMs },
      'leaseTtlMs - renewEveryMs is not longer than a store call may take: a running execution can lose its lease to a late renewal',
    );
  }
  const globalSlot: Slot | undefined =
    settings.maxGlobal === undefined
      ? undefined
      : { key: `${name}:conc:{*}`, limit: settings.maxGlobal, scope: 'global' };

  const { ledger, insurance } = callStore;
  const { store } = settings;
  /** Removes the lease from the shared store (never from the insurance store: that is the ledger). */
  const releaseShared = (slot: Slot, leaseId: string): Promise<void> =>
    callStore('releaseLease', (current) =>
      current === insurance
        ? Promise.resolve()
        : // Refused (the client offline while it reconnects: no offline queue), it is retried,
          // or the slot stays taken for a lease TTL on every host (found by a review;
          // test/lost-reply-fail-fast.test.ts, second case).
          current.releaseLease(slot.key, leaseId).catch((error: unknown) => {
            removeUntilLanded(current, slot, leaseId);
            throw error;
          }),
    ).then(
      () => {},
      (error: unknown) =>
        warn('release', { err: String(error) }, `${name}: could not release a lease`),
    );
  const giveBack = (each: HeldSlot, leaseId: string): Promise<void> => {
    each.givenBack = true;
    ledger.releaseLease(each.slot.key, leaseId);
    if (each.insured && each.mayBeShared === true) removeUntilLanded(store, each.slot, leaseId);
    return each.insured ? Promise.resolve() : releaseShared(each.slot, leaseId);
  };
  /**
   * The shared store granted `leaseId` after the guard stopped waiting. If the insurance store
   * granted the same lease meanwhile (`insured`) and it still runs, the store's copy is its
   * write-back, done early: kept, and the lease is a shared one from then on. Otherwise nobody
   * will release it, so we do. Found by an attack review: removed while it ran (after a write-back
   * that had landed too), the lease left its slot to another host: 2 ran under a cap of 1.
   */
  const lateGrant = (slot: Slot, leaseId: string, insured: HeldSlot | undefined) => {
    if (insured !== undefined && insured.givenBack !== true) insured.insured = false;
    else void releaseShared(slot, leaseId);
  };
  /**
   * Runs `write` (an acquisition or a write-back of `leaseId`) on `current`; if it fails, removes
   * the lease there too, unless this host still runs it (see removeUntilLanded). The failure can
   * come after the store ran it (a connection dropped before its reply): the lease would then
   * hold a slot for a TTL with nobody to release it, or, written back, one the guard still counts
   * as not written back and so never removes. Removing a lease that is not there costs nothing. (Found by an attack review: a cap of 1 stayed full
   * for 15 s on every host after an acquisition refused with UNAVAILABLE, and for a lease TTL
   * after an insured lease whose write-back reply was lost had been released.)
   */
  const removedOnFailure = <T>(
    current: LimitStore,
    slot: Slot,
    leaseId: string,
    holder: () => HeldSlot | undefined,
    write: () => Promise<T>,
  ): Promise<T> => {
    const asked = write();
    if (current === insurance) return asked;
    return asked.catch((error: unknown) => {
      removeUntilLanded(current, slot, leaseId, holder);
      throw error;
    });
  };
  /**
   * Removes `leaseId` from `current` unless this host runs it (`holder`, not given back): then
   * the lease there, if the failed write landed, is its write-back. It stays insured (written
   * back again at the next renewal) and its release removes it (`mayBeShared`). A removal sent
   * while the execution ran could land after a write-back already in flight and delete the
   * running lease, which that write-back's answer had the guard count as a shared one (found by
   * a review: another host took a cap of 1 while it ran; test/removal-after-write-back.test.ts).
   * A removal that fails (the client offline after the connection dropped, with no offline
   * queue: the settings docs/limits.md recommends) is retried every 100 ms until it lands or the
   * lease would have expired (found by a review: dropped at once, the phantom lease kept a cap of
   * 1 full for its TTL; test/lost-reply-fail-fast.test.ts). The failed removals wait in one list,
   * and every 100 ms up to 1 000 of them, the oldest first, are sent again (an outage costs at
   * most 10 000 failed calls a second, as before). Each had its own timer, at most 1 000 at once,
   * and a removal that failed past that bound was dropped: through an outage the removals of
   * refused acquisitions (most never reached Redis) used the bound up, and the release of an
   * execution that ended then was dropped, its lease holding the slot for its TTL after Redis
   * came back (found by an attack review: test/attack-35-leases.test.ts).
   */
  interface Removal {
    current: LimitStore;
    slot: Slot;
    leaseId: string;
    holder: () => HeldSlot | undefined;
    until: number;
  }
  /** Failed removals, oldest first. */
  const retrying = new Set<Removal>();
  /** A retry of the list is scheduled. */
  let retryScheduled = false;
  /** Resolves true once `removal` landed or is no longer needed, false if it failed. */
  const attemptRemoval = (removal: Removal): Promise<boolean> => {
    const held = removal.holder();
    if (held !== undefined && held.givenBack !== true) {
      held.insured = true;
      held.mayBeShared = true;
      return Promise.resolve(true);
    }
    return Promise.resolve()
      .then(() => removal.current.releaseLease(removal.slot.key, removal.leaseId))
      .then(
        () => true,
        () => false,
      );
  };
  /** Schedules the next retry of the list, unless one is scheduled or the list is empty. */
  const scheduleRetry = (): void => {
    if (retryScheduled || retrying.size === 0) return;
    retryScheduled = true;
    setTimeout(retryRemovals, retryEveryMs).unref();
  };
  const retryLater = (removal: Removal): void => {
    if (performance.now() >= removal.until || retrying.size >= maxRetrying) return;
    retrying.add(removal);
    scheduleRetry();
  };
  /** Sends `removal`; if it fails, it goes to the back of the list. Never waited for. */
  const sendRemoval = (removal: Removal): void => {
    void attemptRemoval(removal).then((done) => {
      if (!done) retryLater(removal);
    });
  };
  function retryRemovals(): void {
    retryScheduled = false;
    const now = performance.now();
    let sent = 0;
    for (const removal of retrying) {
      if (sent === retryBatch) break;
      retrying.delete(removal);
      if (now >= removal.until) continue;
      sent++;
      sendRemoval(removal);
    }
    scheduleRetry();
  }
  const removeUntilLanded = (
    current: LimitStore,
    slot: Slot,
    leaseId: string,
    holder: () => HeldSlot | undefined = () => undefined,
  ): void => {
    sendRemoval({ current, slot, leaseId, holder, until: performance.now() + leaseTtlMs });
  };
  const refusal = (
    slot: Slot,
    decision: LeaseDecision,
    source: { insured?: boolean; thisHost?: boolean },
  ) => {
    const { insured, thisHost } = source;
    const message = `${name}: ${slot.limit} executions already in flight ${slot.scope === 'user' ? 'for this user' : 'in total'}${thisHost ? ' on this host' : ''}`;
    return refusalWithoutStack(
      () =>
        new SandboxRateLimitedError(message, {
          retryAfterMs: decision.retryAfterMs,
          details: {
            guard: name,
            scope: slot.scope,
            limit: slot.limit,
            held: decision.held,
            ...(insured ? { insured: true } : {}),
            ...(thisHost ? { thisHost: true } : {}),
            ...(decision.clockFallback ? { clockFallback: true } : {}),
          },
        }),
    );
  };

  /** Takes `slot`: the slot held (and where), undefined when failed open, or a refusal thrown. */
  async function take(
    slot: Slot,
    leaseId: string,
    signal?: AbortSignal,
  ): Promise<HeldSlot | undefined> {
    let insuredSlot: HeldSlot | undefined;
    const outcome = await callStore(
      'acquireLease',
      (current) =>
        removedOnFailure(
          current,
          slot,
          leaseId,
          () => insuredSlot,
          () => current.acquireLease(slot.key, leaseId, slot.limit, leaseTtlMs),
        ),
      signal,
      // Admitted after we stopped waiting (timeout, abort).
      (late) => {
        if (late.allowed) lateGrant(slot, leaseId, insuredSlot);
      },
    );
    if (!outcome.ok) return undefined;
    // Answered by the insurance store: that is the ledger, which knows this host's shared leases.
    if (outcome.insured) {
      if (outcome.value.allowed) {
        insuredSlot = { slot, insured: true };
        return insuredSlot;
      }
      throw refusal(slot, outcome.value, { insured: true });
    }
    if (!outcome.value.allowed) throw refusal(slot, outcome.value, {});
    // Held in this host's ledger too. Refused there when this host alone already holds the cap:
    // the store forgot some (a failover, a restart) or has not seen them yet (insured leases not
    // yet written back). The slot goes back to the store.
    const counted = ledger.acquireLease(slot.key, leaseId, slot.limit, leaseTtlMs);
    if (!counted.allowed) {
      void releaseShared(slot, leaseId);
      throw refusal(slot, counted, { thisHost: true });
    }
    return { slot, insured: false };
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
      // Renewals are timed from when the first acquisition was sent, before the store wrote any
      // lease, and start once a slot is held (renewing whatever `held` holds by then). Timed from
      // the last answer, a lease's first renewal came `renewEveryMs` after an answer that can take
      // up to `timeoutMs` (its own, and the global slot's after the per-user one), and the lease,
      // whose expiry the store counts from when it ran the acquisition, expired there while the
      // execution ran (found by an attack review: another host took a cap of 1;
      // test/attack-35-leases.test.ts).
      const sentAt = performance.now();
      const held: HeldSlot[] = [];
      let renewal: ReturnType<typeof startRenewal> | undefined;
      try {
        for (const slot of slots) {
          const taken = await take(slot, leaseId, signal);
          if (taken === undefined) continue;
          held.push(taken);
          renewal ??= startRenewal(held, leaseId, sentAt + renewEveryMs - performance.now());
        }
      } catch (error) {
        // As in a release: a renewal in flight could re-add a lease after its removal.
        await renewal?.stop();
        await Promise.all(held.map((each) => giveBack(each, leaseId)));
        throw error;
      }
      const insured = held.some((each) => each.insured);
      return lease({ leaseId, insured }, async () => {
        // A renewal still in flight could re-add the lease after its removal: let it land first.
        await renewal?.stop();
        await Promise.all(held.map((each) => giveBack(each, leaseId)));
      });
    },
  };

  /** Renews `held` in `firstInMs` (at once if not positive), then every `renewEveryMs`. */
  function startRenewal(held: HeldSlot[], leaseId: string, firstInMs: number) {
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
    const renewOn = (slot: Slot, limit: number) => (current: LimitStore) =>
      current === insurance
        ? Promise.resolve(undefined)
        : current.acquireLease(slot.key, leaseId, limit, leaseTtlMs);
    // The ledger is renewed whatever the shared store does: the execution runs on this host. A
    // shared lease is renewed on the shared store (never moved to the insurance store: it would
    // never be released there); an insured one is written back to the shared store, at once
    // counted there even over the cap, and is a shared lease from then on.
    const renew = (each: HeldSlot): Promise<void> => {
      const { slot } = each;
      ledger.acquireLease(slot.key, leaseId, writeBackLimit, leaseTtlMs);
      if (!each.insured) {
        return callStore('renewLease', renewOn(slot, slot.limit)).then((outcome) => {
          if (outcome.ok) checkKept(slot, outcome.value);
        }, failed);
      }
      // A write-back that fails is removed again (it may have landed): the lease is insured
      // (again, if a late acquisition had counted as its write-back meanwhile), and the next
      // renewal writes it back.
      const writeBack = (current: LimitStore) => renewOn(slot, writeBackLimit)(current);
      return callStore(
        'writeBackLease',
        (current) =>
          removedOnFailure(
            current,
            slot,
            leaseId,
            () => each,
            () => writeBack(current),
          ).catch((error: unknown) => {
            each.insured = true;
            throw error;
          }),
        undefined,
        // Written back after we stopped waiting: kept if the execution still runs.
        (late) => {
          if (late?.allowed) lateGrant(slot, leaseId, each);
        },
      ).then((outcome) => {
        if (outcome.ok && !outcome.insured && outcome.value?.allowed) each.insured = false;
      }, failed);
    };
    // One timer at a time, re-armed after each renewal; it must not keep the host alive.
    let timer: ReturnType<typeof setTimeout>;
    const tick = () => {
      inFlight = Promise.all([inFlight, ...held.map(renew)]);
      timer = setTimeout(tick, renewEveryMs).unref();
    };
    timer = setTimeout(tick, Math.max(0, firstInMs)).unref();
    return {
      stop: () => {
        clearTimeout(timer);
        return inFlight;
      },
    };
  }
}
