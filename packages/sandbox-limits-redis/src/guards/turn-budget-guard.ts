// Tier 3: at most N admitted executions per conversation turn, counted once per execution id.
import {
  type ExecutionContext,
  type ExecutionGuard,
  type GuardLease,
  SandboxBudgetExhaustedError,
  validate,
} from '@coda/sandbox-core';
import { z } from 'zod';
import { hashTag, keyPart } from '../keys/key-part.ts';
import type { BudgetDecision } from '../store/limit-store.ts';
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

/** Options of {@link createTurnBudgetGuard}. */
export interface TurnBudgetGuardOptions extends GuardOptions {
  /** Executions admitted per conversation turn (1 to 100 000). */
  maxExecutionsPerTurn: number;
  /**
   * How long a turn's count lives after its first admitted execution, in milliseconds; the budget
   * resets after it. Default 3 600 000 (one hour); at most 7 days.
   */
  turnTtlMs?: number | undefined;
  /** An execution without `turnId`: `refuse` (default, `VALIDATION`) or `allow` uncounted. */
  whenNoTurn?: 'refuse' | 'allow' | undefined;
}

/** The lease of an admitted execution: what the budget answered (undefined if failed open). */
export interface TurnBudgetLease extends GuardLease {
  /** What the store answered; undefined when the store failed and the guard failed open. */
  readonly decision: BudgetDecision | undefined;
}

/** The turn-budget guard; `acquire` resolves with a {@link TurnBudgetLease}. */
export interface TurnBudgetGuard extends ExecutionGuard {
  acquire(context: ExecutionContext, signal?: AbortSignal): Promise<TurnBudgetLease>;
}

/** Validates {@link TurnBudgetGuardOptions}. */
export const TurnBudgetGuardOptionsSchema = z.strictObject({
  ...guardOptionsShape('turn-budget'),
  maxExecutionsPerTurn: count(100_000),
  turnTtlMs: millis(7 * 86_400_000).default(3_600_000),
  whenNoTurn: whenMissingSchema,
});

/**
 * Tier 3: at most `maxExecutionsPerTurn` executions per (conversationId, turnId). Only admitted
 * executions count, and an execution id counts once however often it is retried. Releasing the
 * lease does not give budget back. Each admission is counted in this host's ledger too, so one
 * host never admits more than the limit per turn whatever the store answers or forgets
 * (`details.thisHost` when the ledger refused). Refuses with `BUDGET_EXHAUSTED` and `retryAfterMs`
 * (when the turn's count expires).
 */
export function createTurnBudgetGuard(options: TurnBudgetGuardOptions): TurnBudgetGuard {
  const settings = validate(TurnBudgetGuardOptionsSchema, options, 'turn budget guard options');
  const { name, maxExecutionsPerTurn: limit, turnTtlMs } = settings;
  const callStore = createStoreCaller(settings, createWarner(settings.logger, name));
  const { ledger } = callStore;
  const exhausted = (
    decision: BudgetDecision,
    source: { insured?: boolean; thisHost?: boolean; clockFallback?: boolean },
  ) =>
    refusalWithoutStack(
      () =>
        new SandboxBudgetExhaustedError(`${name}: this turn has used its ${limit} executions`, {
          retryAfterMs: decision.resetMs,
          details: {
            guard: name,
            limit,
            used: decision.used,
            ...(source.insured ? { insured: true } : {}),
            ...(source.thisHost ? { thisHost: true } : {}),
            ...(source.clockFallback ? { clockFallback: true } : {}),
          },
        }),
    );
  return {
    name,
    async acquire(context, signal) {
      const parsed = checkContext(context, name);
      const turnId = requiredId(parsed, 'turnId', settings.whenNoTurn, name);
      if (turnId === undefined) return lease({ decision: undefined });
      // '-' marks a missing conversation id; keyPart never returns it, so keys cannot collide.
      const conversation =
        parsed.conversationId === undefined ? '-' : keyPart(parsed.conversationId);
      const key = `${name}:turn:${hashTag(conversation, keyPart(turnId))}`;
      const member = keyPart(parsed.executionId);
      const began = performance.now();
      const outcome = await callStore(
        'claimBudget',
        (current) => current.claimBudget(key, member, limit, turnTtlMs),
        signal,
      );
      if (!outcome.ok) return lease({ decision: undefined });
      if (outcome.insured) {
        // The ledger answered: it counts what the shared store admitted on this host too.
        const decision: BudgetDecision = { ...outcome.value, insured: true };
        if (!decision.allowed) throw exhausted(decision, { insured: true });
        return lease({ decision });
      }
      const decision = outcome.value;
      if (!decision.allowed) {
        throw exhausted(decision, { clockFallback: decision.clockFallback === true });
      }
      // Counted in this host's ledger too. Refused there when this host alone already had the
      // turn's executions: the store forgot some (a failover, a restart) or never saw them (the
      // insurance store's). The store keeps this claim counted: a budget cannot be given back.
      // The count ends no later than the store's: the turn's remaining life as the store gave
      // it, from when the call began. Counted from when the answer arrived (later, under load or
      // on a slow link), or for the whole TTL when this host joined a turn late, the ledger
      // refused a retry at the store's own retryAfterMs. A resetMs of 0 is the turn's last
      // millisecond on Redis (PTTL 0: the key lives until its expiry is past), not "unknown":
      // read as a whole turnTtlMs, the ledger held the turn an hour past the store's reset.
      const storeLeft = Number.isFinite(decision.resetMs)
        ? Math.min(Math.max(0, decision.resetMs), turnTtlMs)
        : turnTtlMs;
      const ledgerTtlMs = Math.max(1, Math.floor(storeLeft - (performance.now() - began)));
      // A turn the ledger already counts ends there no later either: one this host joined on its
      // insurance store (the store down) was counted for a whole turnTtlMs from there, not
      // knowing when the turn began, and refused executions of the next turn the store admitted.
      const counted = ledger.claimBudget(key, member, limit, ledgerTtlMs, ledgerTtlMs);
      if (!counted.allowed) throw exhausted(counted, { thisHost: true });
      // Counted against the turn: at least what this host ran of it (the store may have
      // forgotten some; found by an attack review: 1 of 3 used, and the next claim refused).
      if (counted.used > decision.used)
        return lease({ decision: { ...decision, used: counted.used } });
      return lease({ decision });
    },
  };
}
