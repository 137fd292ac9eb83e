// Tiers 3 and 4 and the concurrency caps as core `ExecutionGuard`s. Any runner (the isolate
// engine here, or the HTTP server's admission step) takes them as they are: the engine never
// imports Redis, the guards never import the engine.
import type { ExecutionGuard } from '@coda/sandbox-core';
import { createLimitGuards, type LimitStore } from '@coda/sandbox-limits-redis';

/** The figures of the demo's guards. */
export interface GuardSettings {
  /** Tier 3: executions per conversation turn. */
  maxExecutionsPerTurn: number;
  /** Tier 4: executions per user per `windowMs`. */
  ratePerUser: number;
  windowMs: number;
  /** Executions one user may have running at once. */
  maxConcurrentPerUser: number;
}

/** What `pnpm demo serve` admits: generous for a person, a wall for a script. */
export const defaultGuardSettings: Readonly<GuardSettings> = Object.freeze({
  maxExecutionsPerTurn: 10,
  ratePerUser: 30,
  windowMs: 60_000,
  maxConcurrentPerUser: 2,
});

/**
 * What the guided run's engine admits: small, so the limits part reaches them in a few runs. The
 * window is long enough that no unit refills while a slow machine runs the part (GCRA gives one
 * back every windowMs / ratePerUser).
 */
export const guidedRunGuardSettings: Readonly<GuardSettings> = Object.freeze({
  maxExecutionsPerTurn: 3,
  ratePerUser: 5,
  windowMs: 60_000,
  maxConcurrentPerUser: 2,
});

/**
 * Tiers 3 and 4 and the concurrency cap as one guard from the limits package. It takes the
 * concurrency slot, then the user's rate unit, then counts the turn; when a later limit refuses,
 * what the earlier ones took is given back, so a refused attempt costs the user nothing.
 * Executions without a turn are never counted against one; executions without a user are
 * refused (`anonymous: 'refuse'`, the server's choice) or admitted unlimited (`'allow'`, for an
 * engine that also runs the host's own jobs).
 */
export function createDemoGuards(
  store: LimitStore,
  settings: Readonly<GuardSettings> = defaultGuardSettings,
  anonymous: 'refuse' | 'allow' = 'refuse',
): ExecutionGuard[] {
  return createLimitGuards({
    store,
    concurrency: { maxPerUser: settings.maxConcurrentPerUser, whenNoUser: anonymous },
    rateLimit: { limit: settings.ratePerUser, windowMs: settings.windowMs, whenNoUser: anonymous },
    turnBudget: { maxExecutionsPerTurn: settings.maxExecutionsPerTurn, whenNoTurn: 'allow' },
  });
}
