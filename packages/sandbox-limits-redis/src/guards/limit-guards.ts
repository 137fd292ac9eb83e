// All limits of this package as one ordered list of guards, for runners that take an array.
import {
  type ExecutionContext,
  type ExecutionGuard,
  type GuardLease,
  isSandboxError,
  SandboxValidationError,
  validate,
} from '@coda/sandbox-core';
import { z } from 'zod';
import type { BudgetDecision, RateLimitDecision } from '../store/limit-store.ts';
import { lease } from './admission.ts';
import { type ConcurrencyGuardOptions, createConcurrencyGuard } from './concurrency-guard.ts';
import { type GuardOptions, storeSchema } from './guard-options.ts';
import {
  createRateLimitGuard,
  type RateLimitGuardOptions,
  type RateLimitLease,
} from './rate-limit-guard.ts';
import {
  createTurnBudgetGuard,
  type TurnBudgetGuardOptions,
  type TurnBudgetLease,
} from './turn-budget-guard.ts';

/**
 * One limit's options inside {@link LimitGuardsOptions}: the guard's own options without the
 * shared store and logger; `failMode` and `timeoutMs` override the shared ones.
 */
export type LimitSection<Options> = Omit<Options, 'store' | 'failMode' | 'timeoutMs' | 'logger'> &
  Partial<Pick<GuardOptions, 'failMode' | 'timeoutMs'>>;

/** Options of {@link createLimitGuards}: shared settings plus the limits you want. */
export interface LimitGuardsOptions extends Omit<GuardOptions, 'name'> {
  /** Concurrency caps (see {@link createConcurrencyGuard}); omitted: none. */
  concurrency?: LimitSection<ConcurrencyGuardOptions>;
  /** Tier 4, the per-user rate limit (see {@link createRateLimitGuard}); omitted: none. */
  rateLimit?: LimitSection<RateLimitGuardOptions>;
  /** Tier 3, the turn budget (see {@link createTurnBudgetGuard}); omitted: none. */
  turnBudget?: LimitSection<TurnBudgetGuardOptions>;
}

const section = z.record(z.string(), z.unknown()).optional();
// The shared options are checked again by each limit's own schema; the store is checked here too
// so that a call with no limits still refuses a bad one.
export const LimitGuardsShape = z.looseObject({
  store: storeSchema,
  concurrency: section,
  rateLimit: section,
  turnBudget: section,
});

/** The lease of {@link createLimitGuards}' guard: what each limit answered. */
export interface LimitsLease extends GuardLease {
  /** The rate limit's answer; undefined without a rate limit, or when it failed open. */
  readonly rate: RateLimitDecision | undefined;
  /** The turn budget's answer; undefined without a budget, or when it failed open. */
  readonly budget: BudgetDecision | undefined;
}

/** The guard of {@link createLimitGuards}; `acquire` resolves with a {@link LimitsLease}. */
export interface LimitsGuard extends ExecutionGuard {
  acquire(context: ExecutionContext, signal?: AbortSignal): Promise<LimitsLease>;
}

/**
 * One guard (in a list, to spread into a runner's `guards`) that enforces every limit given,
 * sharing one store, fail mode, timeout and logger (each limit may override `failMode` and
 * `timeoutMs`). It takes the concurrency slot, then the rate-limit unit, then counts the turn
 * budget; when one refuses, what the earlier ones took is given back — the slot released, the rate
 * unit refunded — so a refused attempt costs nothing. The refusal is the refusing limit's own
 * error (`details.guard` names it). Put it after your own guards in a runner's list: a budget it
 * has counted is not given back if a later guard refuses.
 */
export function createLimitGuards(options: LimitGuardsOptions): LimitsGuard[] {
  validate(LimitGuardsShape, options, 'limit guards options');
  const { concurrency, rateLimit, turnBudget, ...shared } = options;
  const concurrencyGuard =
    concurrency === undefined
      ? undefined
      : within('concurrency', () => createConcurrencyGuard({ ...shared, ...concurrency }));
  const rateGuard =
    rateLimit === undefined
      ? undefined
      : within('rateLimit', () => createRateLimitGuard({ ...shared, ...rateLimit }));
  const budgetGuard =
    turnBudget === undefined
      ? undefined
      : within('turnBudget', () => createTurnBudgetGuard({ ...shared, ...turnBudget }));
  const names = [concurrencyGuard, rateGuard, budgetGuard].flatMap((guard) =>
    guard === undefined ? [] : [guard.name],
  );
  return [
    {
      name: names.length === 0 ? 'limits' : names.join('+'),
      async acquire(context, signal) {
        let slot: GuardLease | undefined;
        let rate: RateLimitLease | undefined;
        let budget: TurnBudgetLease | undefined;
        try {
          slot = await concurrencyGuard?.acquire(context, signal);
          rate = await rateGuard?.acquire(context, signal);
          budget = await budgetGuard?.acquire(context, signal);
        } catch (error) {
          await Promise.all([rate?.refund(), slot?.release()]);
          throw error;
        }
        const decisions = { rate: rate?.decision, budget: budget?.decision };
        return lease(decisions, async () => {
          await slot?.release();
        });
      },
    },
  ];
}

/** Runs a guard factory, naming its section in any validation error (`rateLimit.limit`). */
function within<T>(section: string, create: () => T): T {
  try {
    return create();
  } catch (error) {
    if (!isSandboxError(error) || !(error instanceof SandboxValidationError)) throw error;
    const issues = error.issues.map((issue) => {
      const shared = ['store', 'logger'].includes(issue.path);
      return shared ? issue : { ...issue, path: `${section}.${issue.path}` };
    });
    const list = issues.map((issue) => `${issue.path}: ${issue.message} (got ${issue.received})`);
    throw new SandboxValidationError(`Invalid limit guards options: ${list.join('; ')}`, {
      issues,
    });
  }
}
