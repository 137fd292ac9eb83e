// Tiers 3 and 4 and the concurrency caps as core `ExecutionGuard`s. Any runner (the isolate
// engine here, or the HTTP server's admission step) takes them as they are: the engine never
// imports Redis, the guards never import the engine.
import type { ExecutionGuard } from '@coda/sandbox-core';
import { createLimitGuards, type LimitStore } from '@coda/sandbox-limits-redis';
import { z } from 'zod';

/** The figures of the demo's guards. */
export interface GuardSettings {
  /** Tier 3: executions per conversation turn. */
  maxExecutionsPerTurn: number;
  /** Tier 4: executions per user per `windowMs`, sustained. */
  ratePerUser: number;
  /** The window of {@link GuardSettings.ratePerUser}, in milliseconds. */
  windowMs: number;
  /**
   * Tier 4: executions a user may start back to back before the sustained rate applies (GCRA's
   * bucket size); at most `ratePerUser` makes sense, more lets a burst exceed the window's rate.
   */
  burst: number;
  /** Executions one user may have running at once. */
  maxConcurrentPerUser: number;
}

const count = (max: number) => z.number().int().min(1).max(max);

/** The zod schema of {@link GuardSettings}: what flags, variables and server options are checked by. */
export const GuardSettingsSchema = z.strictObject({
  maxExecutionsPerTurn: count(10_000),
  ratePerUser: count(100_000),
  windowMs: count(86_400_000),
  burst: count(100_000),
  maxConcurrentPerUser: count(1_000),
});

/**
 * What `pnpm demo serve` admits unless told otherwise (`--rate`, `--burst`, `--turn-budget`,
 * `--concurrency`): generous for a person clicking Run (60 back to back, then one a second), a
 * wall for a script.
 */
export const defaultGuardSettings: Readonly<GuardSettings> = Object.freeze({
  maxExecutionsPerTurn: 10,
  ratePerUser: 60,
  windowMs: 60_000,
  burst: 60,
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
  burst: 5,
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
    rateLimit: {
      limit: settings.ratePerUser,
      windowMs: settings.windowMs,
      burst: settings.burst,
      whenNoUser: anonymous,
    },
    turnBudget: { maxExecutionsPerTurn: settings.maxExecutionsPerTurn, whenNoTurn: 'allow' },
  });
}
