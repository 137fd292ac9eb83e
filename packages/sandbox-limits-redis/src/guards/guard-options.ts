// Options every guard shares (store, name, fail mode, timeout, logger) and their schema.
import type { Logger } from '@coda/sandbox-core';
import { silentLogger } from '@coda/sandbox-core';
import { z } from 'zod';
import type { LimitStore } from '../store/limit-store.ts';

/**
 * What a guard does when its store fails or times out: refuse (`closed`), admit without the limit
 * (`open`), or enforce the limit on this host alone with an in-memory store (`insurance`).
 */
export type FailMode = 'closed' | 'open' | 'insurance';

/** Options shared by every guard of this package. */
export interface GuardOptions {
  /** Where the counts live: `createRedisLimitStore(...)` or `createMemoryLimitStore()`. */
  store: LimitStore;
  /**
   * Names the guard in errors and logs, and namespaces its keys: two guards with different names
   * count separately. Letters, digits, `.`, `_`, `-`; at most 64 characters.
   */
  name?: string | undefined;
  /**
   * When the store fails or does not answer within `timeoutMs`: `closed` (default) refuses with
   * `UNAVAILABLE`; `open` admits the execution without the limit and logs a warning; `insurance`
   * logs a warning and applies the limit with this guard's own in-memory store instead, so each
   * host enforces the limit alone while the store is down (the decision says `insured: true`).
   */
  failMode?: FailMode | undefined;
  /** Milliseconds to wait for the store before applying `failMode`. Default 1 000. */
  timeoutMs?: number | undefined;
  /** Where warnings go (a pino logger fits). Default: nothing is logged. */
  logger?: Logger | undefined;
}

/** An object that has every one of `methods` (a store, a logger, a client): checked, not cloned. */
export function withMethods<T>(methods: readonly string[], message: string) {
  return z.custom<T>(
    (value) =>
      typeof value === 'object' &&
      value !== null &&
      methods.every((method) => typeof (value as Record<string, unknown>)[method] === 'function'),
    message,
  );
}

/** A {@link LimitStore}, checked by its methods. */
export const storeSchema = withMethods<LimitStore>(
  ['rateLimit', 'refundRate', 'claimBudget', 'acquireLease', 'releaseLease'],
  'expected a LimitStore from createRedisLimitStore() or createMemoryLimitStore()',
);

export const loggerSchema = withMethods<Logger>(
  ['debug', 'info', 'warn', 'error'],
  'expected a logger with debug, info, warn and error methods',
);

/** A positive whole number of at most `max`. */
export const count = (max: number) => z.number().int().min(1).max(max);

/** Milliseconds: a whole number from 1 to `max`. */
export const millis = (max: number) => z.number().int().min(1).max(max);

/** The zod shape of {@link GuardOptions}, with `name` defaulting to `defaultName`. */
export function guardOptionsShape(defaultName: string) {
  return {
    store: storeSchema,
    name: z
      .string()
      .regex(/^[A-Za-z0-9._-]{1,64}$/, 'letters, digits, ".", "_" and "-", 1 to 64 of them')
      .default(defaultName),
    failMode: z.enum(['closed', 'open', 'insurance']).default('closed'),
    timeoutMs: millis(60_000).default(1_000),
    logger: loggerSchema.default(silentLogger),
  };
}

/** Whether a guard refuses or admits an execution whose context lacks the id it keys on. */
export const whenMissingSchema = z.enum(['refuse', 'allow']).default('refuse');
