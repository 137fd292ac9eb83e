// One subclass per code, so callers who prefer classes get them; each sets `name` and `code`.
import type { JsonObject } from '../json-value.ts';
import { SandboxErrorCode } from './codes.ts';
import { SandboxError, type SandboxErrorOptions } from './sandbox-error.ts';

/** The time limit ended the execution (`code: TIMEOUT`). */
export class SandboxTimeoutError extends SandboxError {
  /** Always `TIMEOUT`: narrows `code` after an `instanceof` check. */
  declare readonly code: typeof SandboxErrorCode.TIMEOUT;

  constructor(message = 'Execution timed out', options?: SandboxErrorOptions) {
    super(SandboxErrorCode.TIMEOUT, message, options);
    this.name = 'SandboxTimeoutError';
  }
}

/** The memory limit ended the execution (`code: OOM`). */
export class SandboxOOMError extends SandboxError {
  /** Always `OOM`: narrows `code` after an `instanceof` check. */
  declare readonly code: typeof SandboxErrorCode.OOM;

  constructor(message = 'Execution ran out of memory', options?: SandboxErrorOptions) {
    super(SandboxErrorCode.OOM, message, options);
    this.name = 'SandboxOOMError';
  }
}

/** One field that failed validation: where it is, what was wrong, what value it had. */
export interface ValidationIssue {
  /** Dotted path of the field (`limits.memoryMb`, `allowedSyscalls.2`); `''` for the root. */
  path: string;
  /** What is wrong with it, in words. */
  message: string;
  /** The value that was given, made printable (`NaN`, `-1`, `"abc"`, `undefined`). */
  received: string;
}

/** Input or output broke a rule (`code: VALIDATION`). `issues` names every bad field. */
export class SandboxValidationError extends SandboxError {
  /** Always `VALIDATION`: narrows `code` after an `instanceof` check. */
  declare readonly code: typeof SandboxErrorCode.VALIDATION;

  /** Each bad field, in the order found. Empty when the rule was not about a field. */
  readonly issues: readonly ValidationIssue[];

  constructor(
    message: string,
    options: SandboxErrorOptions & { issues?: readonly ValidationIssue[] } = {},
  ) {
    const issues = options.issues ?? [];
    const details: JsonObject = { ...options.details };
    if (issues.length > 0) details.issues = issues.map((issue) => ({ ...issue }));
    super(SandboxErrorCode.VALIDATION, message, { ...options, details });
    this.name = 'SandboxValidationError';
    this.issues = issues;
  }
}

/** A bridge limit ended the execution (`code: LIMIT_EXCEEDED`); details say which and how far. */
export class SandboxLimitExceededError extends SandboxError {
  /** Always `LIMIT_EXCEEDED`: narrows `code` after an `instanceof` check. */
  declare readonly code: typeof SandboxErrorCode.LIMIT_EXCEEDED;

  constructor(message: string, options?: SandboxErrorOptions) {
    super(SandboxErrorCode.LIMIT_EXCEEDED, message, options);
    this.name = 'SandboxLimitExceededError';
  }
}

/** The user's code threw and did not catch it (`code: RUNTIME`). */
export class SandboxRuntimeError extends SandboxError {
  /** Always `RUNTIME`: narrows `code` after an `instanceof` check. */
  declare readonly code: typeof SandboxErrorCode.RUNTIME;

  constructor(message: string, options?: SandboxErrorOptions) {
    super(SandboxErrorCode.RUNTIME, message, options);
    this.name = 'SandboxRuntimeError';
  }
}

/** The runner is full (`code: CAPACITY`). */
export class SandboxCapacityError extends SandboxError {
  /** Always `CAPACITY`: narrows `code` after an `instanceof` check. */
  declare readonly code: typeof SandboxErrorCode.CAPACITY;

  constructor(message: string, options?: SandboxErrorOptions) {
    super(SandboxErrorCode.CAPACITY, message, options);
    this.name = 'SandboxCapacityError';
  }
}

/** Options of errors that tell the caller when to try again. */
export interface RetryableErrorOptions extends SandboxErrorOptions {
  /** Milliseconds after which a retry may succeed; also written to `details.retryAfterMs`. */
  retryAfterMs?: number;
}

function withRetryAfter(options: RetryableErrorOptions): SandboxErrorOptions {
  if (options.retryAfterMs === undefined) return options;
  return { ...options, details: { ...options.details, retryAfterMs: options.retryAfterMs } };
}

/** A rate limit or concurrency cap refused the execution (`code: RATE_LIMITED`). */
export class SandboxRateLimitedError extends SandboxError {
  /** Always `RATE_LIMITED`: narrows `code` after an `instanceof` check. */
  declare readonly code: typeof SandboxErrorCode.RATE_LIMITED;

  /** Milliseconds until a retry may be admitted, when known. */
  readonly retryAfterMs: number | undefined;

  constructor(message: string, options: RetryableErrorOptions = {}) {
    super(SandboxErrorCode.RATE_LIMITED, message, withRetryAfter(options));
    this.name = 'SandboxRateLimitedError';
    this.retryAfterMs = options.retryAfterMs;
  }
}

/** The conversation turn's budget is spent (`code: BUDGET_EXHAUSTED`). */
export class SandboxBudgetExhaustedError extends SandboxError {
  /** Always `BUDGET_EXHAUSTED`: narrows `code` after an `instanceof` check. */
  declare readonly code: typeof SandboxErrorCode.BUDGET_EXHAUSTED;

  /** Milliseconds until the budget resets, when it resets on its own. */
  readonly retryAfterMs: number | undefined;

  constructor(message: string, options: RetryableErrorOptions = {}) {
    super(SandboxErrorCode.BUDGET_EXHAUSTED, message, withRetryAfter(options));
    this.name = 'SandboxBudgetExhaustedError';
    this.retryAfterMs = options.retryAfterMs;
  }
}

/** The caller cancelled the execution (`code: CANCELLED`). */
export class SandboxCancelledError extends SandboxError {
  /** Always `CANCELLED`: narrows `code` after an `instanceof` check. */
  declare readonly code: typeof SandboxErrorCode.CANCELLED;

  constructor(message = 'Execution cancelled', options?: SandboxErrorOptions) {
    super(SandboxErrorCode.CANCELLED, message, options);
    this.name = 'SandboxCancelledError';
  }
}

/** What ran the execution died (`code: CRASH`). */
export class SandboxCrashError extends SandboxError {
  /** Always `CRASH`: narrows `code` after an `instanceof` check. */
  declare readonly code: typeof SandboxErrorCode.CRASH;

  constructor(message: string, options?: SandboxErrorOptions) {
    super(SandboxErrorCode.CRASH, message, options);
    this.name = 'SandboxCrashError';
  }
}

/** A needed dependency is down or missing (`code: UNAVAILABLE`). */
export class SandboxUnavailableError extends SandboxError {
  /** Always `UNAVAILABLE`: narrows `code` after an `instanceof` check. */
  declare readonly code: typeof SandboxErrorCode.UNAVAILABLE;

  constructor(message: string, options?: SandboxErrorOptions) {
    super(SandboxErrorCode.UNAVAILABLE, message, options);
    this.name = 'SandboxUnavailableError';
  }
}
