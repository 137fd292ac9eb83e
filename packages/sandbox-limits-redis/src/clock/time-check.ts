// Every time value is checked before it reaches a Lua script or the memory store's arithmetic: a
// clock reading 1e300 once let 20 of 20 checks through a limit of 3 (at that magnitude adding the
// emission interval changes nothing), and NaN, strings or Infinity must not reach it either.
import type { Logger } from '@coda/sandbox-core';
import { monotonicNow } from './host-clock.ts';

/** How far a clock may be from this process's monotonic time before it is not used: 10 years. */
export const saneWindowMs = 10 * 365.25 * 86_400_000;

/**
 * `value` if it is a finite number within {@link saneWindowMs} of `reference`, else `undefined`.
 * The window is far wider than any real skew: it only refuses values no clock can read (a skew
 * of a day or an hour passes, and is documented as skew).
 */
export function saneTime(value: unknown, reference: number): number | undefined {
  if (typeof value !== 'number') return undefined;
  // NaN fails both comparisons; ±Infinity fails one.
  return value >= reference - saneWindowMs && value <= reference + saneWindowMs ? value : undefined;
}

/** A clock reading: the time, or `undefined` when the clock was refused and the store's own is used. */
export type CheckedClock = () => number | undefined;

/**
 * Wraps `read` (a clock the store was given: the host's, or the memory store's `now` option) so
 * that each reading is checked against this process's monotonic clock; a refused reading is
 * logged once per store (`what` names the clock) and answered `undefined`: the caller then falls
 * back to the store's own clock and says so (`clockFallback: true`).
 */
export function checkedClock(read: () => unknown, what: string, logger: Logger): CheckedClock {
  let logged = false;
  return () => {
    const value = read();
    const now = saneTime(value, monotonicNow());
    if (now === undefined && !logged) {
      logged = true;
      try {
        logger.warn(
          { clock: what, value: describe(value) },
          `${what} read ${describe(value)}, outside ±10 years of this host's monotonic clock: using the store's own clock instead (logged once)`,
        );
      } catch {}
    }
    return now;
  };
}

/** A short, safe rendering of a clock's reading for the log (it may be anything). */
function describe(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value.slice(0, 40));
  if (typeof value === 'number' || typeof value === 'bigint' || typeof value === 'boolean') {
    return String(value);
  }
  return value === null ? 'null' : typeof value;
}

/** `decision`, marked `clockFallback: true` when it was timed by the store's own clock. */
export function withClockFallback<Decision extends object>(
  decision: Decision,
  fellBack: boolean,
): Decision {
  return fellBack ? { ...decision, clockFallback: true } : decision;
}
