// Warnings a guard logs when its store misbehaves: never thrown back at the host, and throttled so
// that an outage under load (thousands of fail-open admissions a second) does not flood the log.
import type { Logger } from '@coda/sandbox-core';

/** Logs a warning of one kind (`topic`); see {@link createWarner}. */
export type Warn = (topic: string, fields: Record<string, unknown>, message: string) => void;

const quietMs = 10_000;

/**
 * A warning function for one guard: the first warning of a topic is logged at once, the next ones
 * at most once per 10 s with `suppressed` saying how many were dropped in between. A logger that
 * throws is ignored: logging must not turn an admission into a crash.
 */
export function createWarner(logger: Logger, guard: string): Warn {
  const topics = new Map<string, { lastAt: number; suppressed: number }>();
  return (topic, fields, message) => {
    const now = performance.now();
    const state = topics.get(topic);
    if (state !== undefined && now - state.lastAt < quietMs) {
      state.suppressed++;
      return;
    }
    const suppressed = state?.suppressed ?? 0;
    topics.set(topic, { lastAt: now, suppressed: 0 });
    try {
      logger.warn({ guard, ...fields, ...(suppressed > 0 ? { suppressed } : {}) }, message);
    } catch {}
  };
}
