// Tier 4: a per-user rate limit shared by every host, as an ExecutionGuard.
import {
  type ExecutionContext,
  type ExecutionGuard,
  type GuardLease,
  type JsonObject,
  SandboxRateLimitedError,
  validate,
} from '@coda/sandbox-core';
import { z } from 'zod';
import { hashTag, keyPart } from '../keys/key-part.ts';
import type { RateLimitDecision } from '../store/limit-store.ts';
import { checkContext, nothingToRelease, refusalWithoutStack, requiredId } from './admission.ts';
import {
  count,
  type GuardOptions,
  guardOptionsShape,
  millis,
  whenMissingSchema,
} from './guard-options.ts';
import { RefundLog, type UnitTimes } from './refund-log.ts';
import { RefusalCache } from './refusal-cache.ts';
import { createStoreCaller, type StoreOutcome } from './store-call.ts';
import { createWarner } from './warnings.ts';

/** Options of {@link createRateLimitGuard}. */
export interface RateLimitGuardOptions extends GuardOptions {
  /** Executions a user may start per `windowMs`, sustained (1 to 1 000 000). */
  limit: number;
  /** The window `limit` applies to, in milliseconds (1 ms to 1 day). */
  windowMs: number;
  /**
   * Executions a user may start at once after being idle; default `limit`. Lower it to smooth
   * traffic (at most `burst + t × limit / windowMs` executions in any interval of length t).
   */
  burst?: number | undefined;
  /** An execution without `userId`: `refuse` (default, `VALIDATION`) or `allow` unlimited. */
  whenNoUser?: 'refuse' | 'allow' | undefined;
  /**
   * How many refused users this guard remembers (default 10 000; 0 turns the cache off; at most
   * 1 000 000). A user the store refused with `retryAfterMs` is refused here, without a round
   * trip, until that time has passed since the answer arrived: hammering costs no Redis call.
   * The cache only ever refuses; every admission comes from the store. See docs/limits.md.
   */
  refusalCache?: number | undefined;
}

/** The lease of an admitted execution: what the rate limit answered (undefined if failed open). */
export interface RateLimitLease extends GuardLease {
  /** What the store answered; undefined when the store failed and the guard failed open. */
  readonly decision: RateLimitDecision | undefined;
  /**
   * Gives the unit back, for an execution that was admitted here but never ran (another limit
   * refused it). Once only; never throws. `release()` does not refund: a run spends its unit.
   */
  refund(): Promise<void>;
}

/** The per-user rate-limit guard; `acquire` resolves with a {@link RateLimitLease}. */
export interface RateLimitGuard extends ExecutionGuard {
  acquire(context: ExecutionContext, signal?: AbortSignal): Promise<RateLimitLease>;
}

const day = 86_400_000;

/** Validates {@link RateLimitGuardOptions}. */
export const RateLimitGuardOptionsSchema = z
  .strictObject({
    ...guardOptionsShape('rate-limit'),
    limit: count(1_000_000),
    windowMs: millis(day),
    burst: count(1_000_000).optional(),
    whenNoUser: whenMissingSchema,
    refusalCache: z.number().int().min(0).max(1_000_000).default(10_000),
  })
  .refine(
    // Judged only once both figures are valid, so a bad one is reported once.
    (options) =>
      !(options.limit >= 1 && options.windowMs >= 1) || options.windowMs / options.limit >= 0.001,
    {
      message: 'limit per windowMs must not exceed 1 000 per millisecond',
      path: ['limit'],
    },
  );

/**
 * Tier 4: at most `limit` executions per user per `windowMs`, across every host that shares the
 * store, by GCRA (a token bucket that refills continuously: no burst at a window edge). A refused
 * check consumes nothing. Each unit the store grants is counted in this host's ledger too, so one
 * host never gets more than the limit (plus the ledger's slack, the longest a store call still
 * takes its answer: at most `1.1 × timeoutMs + 10 ms`) whatever the store answers or forgets
 * (`details.thisHost` when the ledger refused). Refuses with `RATE_LIMITED` and `retryAfterMs`.
 */
export function createRateLimitGuard(options: RateLimitGuardOptions): RateLimitGuard {
  const settings = validate(RateLimitGuardOptionsSchema, options, 'rate limit guard options');
  const { name, limit, windowMs } = settings;
  const rule = { limit, windowMs, burst: settings.burst ?? limit };
  const warn = createWarner(settings.logger, name);
  const callStore = createStoreCaller(settings, warn);
  const refusals =
    settings.refusalCache === 0 ? undefined : new RefusalCache(settings.refusalCache);
  const { ledger, insurance } = callStore;
  /**
   * Gives what is left of a unit back to the shared store alone (never to the insurance store:
   * the ledger); `unitLeftMs` undefined for a unit just granted (all of it).
   */
  const refundShared = (key: string, unitLeftMs?: number, landed?: () => void): Promise<void> =>
    callStore('refundRate', (current) => {
      if (current === insurance) {
        landed?.();
        return Promise.resolve();
      }
      let sent: Promise<void>;
      try {
        sent = current.refundRate(key, rule, unitLeftMs);
      } catch (error) {
        sent = Promise.reject(error);
      }
      // Until the store has answered (even after the guard stopped waiting), the refund may
      // still land after checks sent from now on: see RefundLog.storeMark.
      if (landed !== undefined) sent.then(landed, landed);
      return sent;
    }).then(
      () => {},
      (error: unknown) => warn('refund', { err: String(error) }, `${name}: refund failed`),
    );
  const interval = windowMs / limit;
  const refunds = new RefundLog(interval * rule.burst + settings.timeoutMs);
  /**
   * What is left of a unit answered at `answeredAt` with `resetMs`: its time less what has
   * passed and what was given back on its key since (see refund-log.ts), at most one interval.
   * Logged as given back.
   */
  const unitLeft = (
    key: string,
    answeredAt: number,
    resetMs: UnitTimes,
    marks: UnitTimes,
  ): UnitTimes & { seq: number } => {
    // Less 1 ms: a store timed by whole milliseconds (clock 'host') can count up to 1 ms behind
    // this clock, and a unit refunded at once must come back whole.
    const since = performance.now() - answeredAt - 1;
    const moved = refunds.since(key, marks);
    const left = (reset: number, shift: number) =>
      Math.min(interval, Math.max(0, reset - since - shift));
    const given = {
      store: left(resetMs.store, moved.store),
      ledger: left(resetMs.ledger, moved.ledger),
    };
    const seq = refunds.add(key, given);
    return { ...given, seq };
  };
  const refund: Refund = (key, refusalKey, answeredAt, resetMs, marks) => {
    // The store may admit this user sooner now: stop refusing them here.
    refusals?.forget(refusalKey);
    const left = unitLeft(key, answeredAt, resetMs, marks);
    ledger.refundRate(key, rule, left.ledger);
    return refundShared(key, left.store, () => refunds.landed(left.seq));
  };
  const keyPrefix = `${name}:rate:`;
  // A unit the insurance store granted is in this host's ledger alone: it goes back there.
  const refundInsured: Refund = (key, _refusalKey, answeredAt, resetMs, marks) => {
    const left = unitLeft(key, answeredAt, resetMs, marks);
    refunds.landed(left.seq);
    ledger.refundRate(key, rule, left.ledger);
    return Promise.resolve();
  };
  const message = `${name}: rate limit of ${limit} executions per ${windowMs} ms reached; retry in `;
  /** A refusal; `source` says who refused when it was not the shared store. */
  const refused = (
    retryAfterMs: number,
    resetMs: number,
    cached: boolean,
    source: { insured?: boolean; thisHost?: boolean; clockFallback?: boolean } = {},
  ) => {
    const details: JsonObject = {
      guard: name,
      scope: 'user',
      limit,
      windowMs,
      burst: rule.burst,
      remaining: 0,
      resetMs,
      cached,
    };
    if (source.insured) details.insured = true;
    if (source.thisHost) details.thisHost = true;
    if (source.clockFallback) details.clockFallback = true;
    return refusalWithoutStack(
      () => new SandboxRateLimitedError(`${message}${retryAfterMs} ms`, { retryAfterMs, details }),
    );
  };
  // A unit the shared store granted is counted in the ledger too, with slack: the ledger times
  // each unit when its answer arrives, so round trips that vary (at most the longest a call
  // still takes its answer, or it would have timed out) can bring two units closer together
  // there than they were on the store. Without that slack a host alone at the edge of its limit
  // was refused by its ledger what the store had admitted (measured: by 6 ms); with `timeoutMs`
  // alone, after an answer the watcher took between timeoutMs and its next tick (up to a tenth
  // later). Answering as the insurance store, the ledger applies the rule exactly. See
  // docs/limits.md for the bound this gives.
  const ledgerSlackMs = callStore.latestAnswerMs;
  const admit = (
    outcome: StoreOutcome<RateLimitDecision>,
    key: string,
    refusalKey: string,
    sentAt: number,
    sentMark: number,
  ): RateLimitLease => {
    if (!outcome.ok) return unlimited;
    const decision = outcome.value;
    if (outcome.insured) {
      if (decision.allowed) {
        const insured = { ...decision, insured: true } as const;
        const mark = refunds.mark;
        return new AdmittedRate(
          insured,
          key,
          refusalKey,
          refundInsured,
          decision.resetMs,
          mark,
          mark,
        );
      }
      throw refused(decision.retryAfterMs, decision.resetMs, false, { insured: true });
    }
    if (!decision.allowed) {
      refusals?.refuse(refusalKey, decision.retryAfterMs, decision.resetMs, sentAt);
      throw refused(decision.retryAfterMs, decision.resetMs, false, {
        clockFallback: decision.clockFallback === true,
      });
    }
    const counted = ledger.rateLimit(key, rule, ledgerSlackMs);
    if (!counted.allowed) {
      // This host alone already had its limit: the store forgot some of it (a failover, a
      // restart) or never saw it (units the insurance store granted). The unit goes back, and
      // the user is refused here until the ledger would admit again (with its slack): hammering
      // then costs no round trip (and no refund) either.
      void refundShared(key);
      const retryAfterMs = Math.max(1, counted.retryAfterMs - ledgerSlackMs);
      refusals?.refuse(refusalKey, retryAfterMs, counted.resetMs);
      throw refused(retryAfterMs, counted.resetMs, false, { thisHost: true });
    }
    // Refunds after the check was sent may have moved this unit on the store; on the ledger,
    // which counted it just now, only those from now on (see refund-log.ts).
    const { mark } = refunds;
    // What would still be admitted right now is what both would admit: after the store forgot
    // this host's units it counts a fuller bucket than the ledger lets this host use (found by an
    // attack review: 2 remaining, and the second check was refused, thisHost).
    const answer =
      counted.remaining < decision.remaining
        ? { ...decision, remaining: counted.remaining }
        : decision;
    return new AdmittedRate(answer, key, refusalKey, refund, counted.resetMs, sentMark, mark);
  };
  const refuseLocally = (error: Error): Promise<never> => {
    // Rejected a microtask later, once the caller has attached its handler: a promise rejected
    // before it has one goes through Node's unhandled-rejection tracking, and throwing from a
    // `then` costs an exception (measured: ~660 ns and ~400 ns against ~160 ns for this).
    return new Promise((_, reject) => {
      queueMicrotask(() => reject(error));
    });
  };
  return {
    name,
    // A promise chain rather than an async function: this runs on every admission.
    acquire(context, signal) {
      let userId: string | undefined;
      try {
        userId = requiredId(checkContext(context, name), 'userId', settings.whenNoUser, name);
      } catch (error) {
        return Promise.reject(error);
      }
      if (userId === undefined) return Promise.resolve(unlimited);
      const refusalKey = refusals === undefined ? userId : cacheKey(userId);
      if (refusals !== undefined && signal?.aborted !== true) {
        const left = refusals.lookup(refusalKey);
        if (left !== undefined)
          return refuseLocally(refused(left.retryAfterMs, left.resetMs, true));
      }
      const key = keyPrefix + hashTag(keyPart(userId));
      // A refund on this host while the check is in flight makes its refusal stale: not cached.
      const sentAt = refusals?.epoch ?? 0;
      const sentMark = refunds.storeMark;
      return callStore(
        'rateLimit',
        (current) => current.rateLimit(key, rule),
        signal,
        undefined,
        (outcome) => admit(outcome, key, refusalKey, sentAt, sentMark),
      );
    },
  };
}

/**
 * The refusal cache's key for `userId`: the id itself when short (no hashing on the hot path), its
 * hashed key part when long, so an entry stays small (at most 64 characters) whatever the id. A
 * hashed part starts with `#`, and so does every id sent through it: the two forms cannot collide.
 */
function cacheKey(userId: string): string {
  return userId.length <= 64 && userId.charCodeAt(0) !== 0x23 ? userId : keyPart(userId);
}

/** The lease of a check that was not limited (no user and `whenNoUser: 'allow'`, or failed open). */
const unlimited: RateLimitLease = Object.freeze({
  decision: undefined,
  refund: nothingToRelease,
  release: nothingToRelease,
});

/**
 * Gives what is left of one unit of `key`, answered at `answeredAt` with `resetMs`, back to the
 * store that granted it and to the ledger (`refusalKey`: the user's in the cache).
 */
type Refund = (
  key: string,
  refusalKey: string,
  answeredAt: number,
  resetMs: UnitTimes,
  marks: UnitTimes,
) => Promise<void>;

/**
 * The lease of an admitted check. A class rather than closures: one object per admission on the
 * hot path. Releasing gives nothing back (the run spent its unit); `refund` does, once: what is
 * left of the unit, its `resetMs` less the time since the answer arrived and less what was given
 * back on its key on this host since (a unit whose time has passed holds nothing any more). The
 * store counted the unit before its answer travelled back, so this can give back up to one round
 * trip (plus 1 ms) of refill beyond what is left, never more than the unit.
 */
class AdmittedRate implements RateLimitLease {
  readonly decision: RateLimitDecision;
  readonly #key: string;
  readonly #refusalKey: string;
  readonly #refund: Refund;
  readonly #answeredAt = performance.now();
  /** The ledger's `resetMs` for this unit (the store's is the decision's). */
  readonly #ledgerResetMs: number;
  /** The refund log's marks when the check was sent (the store's) and counted in the ledger. */
  readonly #storeMark: number;
  readonly #ledgerMark: number;
  #refunded: Promise<void> | undefined;

  constructor(
    decision: RateLimitDecision,
    key: string,
    refusalKey: string,
    refund: Refund,
    ledgerResetMs: number,
    storeMark: number,
    ledgerMark: number,
  ) {
    this.decision = decision;
    this.#key = key;
    this.#refusalKey = refusalKey;
    this.#refund = refund;
    this.#ledgerResetMs = ledgerResetMs;
    this.#storeMark = storeMark;
    this.#ledgerMark = ledgerMark;
  }

  refund(): Promise<void> {
    if (this.#refunded === undefined) {
      const resetMs = { store: this.decision.resetMs, ledger: this.#ledgerResetMs };
      const marks = { store: this.#storeMark, ledger: this.#ledgerMark };
      this.#refunded = this.#refund(this.#key, this.#refusalKey, this.#answeredAt, resetMs, marks);
    }
    return this.#refunded;
  }

  release(): Promise<void> {
    return nothingToRelease();
  }
}
