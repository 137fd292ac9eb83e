/**
 * Every code a Coda Sandbox error or `error` event can carry. One table for all layers, so a
 * caller can switch on `code` whichever runner produced the error.
 */
export const SandboxErrorCode = {
  /** The wall-clock or CPU time limit ended the execution. */
  TIMEOUT: 'TIMEOUT',
  /** The execution exceeded its memory limit. */
  OOM: 'OOM',
  /** Input or output broke a rule: bad options, oversized code, an oversized result. */
  VALIDATION: 'VALIDATION',
  /** A bridge limit (data requests, data bytes, status bytes) ended the execution. */
  LIMIT_EXCEEDED: 'LIMIT_EXCEEDED',
  /** The user's code threw (or rejected) and did not catch it. */
  RUNTIME: 'RUNTIME',
  /** The runner is at its concurrency ceiling and refused to start another execution. */
  CAPACITY: 'CAPACITY',
  /** A per-user rate limit (tier 4) or concurrency cap refused the execution. */
  RATE_LIMITED: 'RATE_LIMITED',
  /** The conversation turn's execution budget (tier 3) is spent. */
  BUDGET_EXHAUSTED: 'BUDGET_EXHAUSTED',
  /** The caller cancelled the execution (AbortSignal, handle.cancel(), dispose()). */
  CANCELLED: 'CANCELLED',
  /** The process or isolate running the execution died or failed beyond recovery. */
  CRASH: 'CRASH',
  /** A dependency the runner needs (Redis, a sandbox mechanism) is not available. */
  UNAVAILABLE: 'UNAVAILABLE',
} as const;

/** One of the codes in {@link SandboxErrorCode}. */
export type SandboxErrorCode = (typeof SandboxErrorCode)[keyof typeof SandboxErrorCode];

const knownCodes: ReadonlySet<string> = new Set(Object.values(SandboxErrorCode));

/** Whether `value` is one of the codes in {@link SandboxErrorCode}. */
export function isSandboxErrorCode(value: unknown): value is SandboxErrorCode {
  return typeof value === 'string' && knownCodes.has(value);
}
