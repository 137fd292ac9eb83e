// The figures a store is called with, checked where they arrive: the guards validate theirs, but a
// store is public and called directly too, and a window or TTL of NaN, Infinity or 1e300 must not
// reach a script or the memory store's arithmetic any more than such a clock reading may.
import { validate } from '@coda/sandbox-core';
import { z } from 'zod';
import type { RateRule } from './limit-store.ts';

const day = 86_400_000;
/** The longest window a rate rule may have (as the rate-limit guard's `windowMs`). */
const maxWindowMs = day;
/** The longest TTL a budget or lease may have (as the turn-budget guard's `turnTtlMs`). */
const maxTtlMs = 7 * day;

const isWhole = (value: unknown, max: number) =>
  Number.isInteger(value) && (value as number) >= 1 && (value as number) <= max;

const count = z.number().int().min(1).max(Number.MAX_SAFE_INTEGER);
const ruleSchema = z.object({
  limit: count,
  windowMs: z.number().int().min(1).max(maxWindowMs),
  burst: count,
});
const limitAndTtlSchema = z.object({ limit: count, ttlMs: z.number().int().min(1).max(maxTtlMs) });

/**
 * Throws `VALIDATION` naming each bad figure of `rule` unless all are whole numbers in range
 * (checked by hand first: this runs on every check).
 */
export function checkRule(rule: RateRule): void {
  if (
    typeof rule === 'object' &&
    rule !== null &&
    isWhole(rule.limit, Number.MAX_SAFE_INTEGER) &&
    isWhole(rule.windowMs, maxWindowMs) &&
    isWhole(rule.burst, Number.MAX_SAFE_INTEGER)
  ) {
    return;
  }
  validate(ruleSchema, rule, 'rate rule');
}

/** As {@link checkRule}, for the `limit` and `ttlMs` of a budget claim or a lease. */
export function checkLimitAndTtl(limit: number, ttlMs: number): void {
  if (isWhole(limit, Number.MAX_SAFE_INTEGER) && isWhole(ttlMs, maxTtlMs)) return;
  validate(limitAndTtlSchema, { limit, ttlMs }, 'limit and TTL');
}
