// All limits of this package as one ordered list of guards, for runners that take an array.
import {
  type ExecutionGuard,
  isSandboxError,
  SandboxValidationError,
  validate,
} from '@coda/sandbox-core';
import { z } from 'zod';
import { type ConcurrencyGuardOptions, createConcurrencyGuard } from './concurrency-guard.ts';
import type { GuardOptions } from './guard-options.ts';
import { createRateLimitGuard, type RateLimitGuardOptions } from './rate-limit-guard.ts';
import { createTurnBudgetGuard, type TurnBudgetGuardOptions } from './turn-budget-guard.ts';

type Own<Options> = Omit<Options, 'store' | 'failMode' | 'timeoutMs' | 'logger'> &
  Partial<Pick<GuardOptions, 'failMode' | 'timeoutMs'>>;

/** Options of {@link createLimitGuards}: shared settings plus the limits you want. */
export interface LimitGuardsOptions extends Omit<GuardOptions, 'name'> {
  /** Concurrency caps (see {@link createConcurrencyGuard}); omitted: none. */
  concurrency?: Own<ConcurrencyGuardOptions>;
  /** Tier 4, the per-user rate limit (see {@link createRateLimitGuard}); omitted: none. */
  rateLimit?: Own<RateLimitGuardOptions>;
  /** Tier 3, the turn budget (see {@link createTurnBudgetGuard}); omitted: none. */
  turnBudget?: Own<TurnBudgetGuardOptions>;
}

const section = z.record(z.string(), z.unknown()).optional();
const LimitGuardsShape = z.looseObject({
  concurrency: section,
  rateLimit: section,
  turnBudget: section,
});

/**
 * The guards for the limits given, sharing one store, fail mode, timeout and logger (each limit
 * may override `failMode` and `timeoutMs`), in the order that wastes least when one refuses:
 * concurrency (its slot is given back on refusal), then the rate limit (a refusal there leaves the
 * budget untouched), then the turn budget last (so no later guard can refuse an execution it has
 * counted). Put them after your own guards in a runner's list for the same reason.
 */
export function createLimitGuards(options: LimitGuardsOptions): ExecutionGuard[] {
  validate(LimitGuardsShape, options, 'limit guards options');
  const { concurrency, rateLimit, turnBudget, ...shared } = options;
  const guards: ExecutionGuard[] = [];
  if (concurrency !== undefined) {
    guards.push(within('concurrency', () => createConcurrencyGuard({ ...shared, ...concurrency })));
  }
  if (rateLimit !== undefined) {
    guards.push(within('rateLimit', () => createRateLimitGuard({ ...shared, ...rateLimit })));
  }
  if (turnBudget !== undefined) {
    guards.push(within('turnBudget', () => createTurnBudgetGuard({ ...shared, ...turnBudget })));
  }
  return guards;
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
