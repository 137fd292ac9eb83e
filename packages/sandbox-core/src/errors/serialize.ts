// Turns the wire form of an error back into the right class, and any thrown value into JSON.
import type { JsonObject } from '../json-value.ts';
import { isSandboxErrorCode, SandboxErrorCode } from './codes.ts';
import {
  SandboxBudgetExhaustedError,
  SandboxCancelledError,
  SandboxCapacityError,
  SandboxCrashError,
  SandboxLimitExceededError,
  SandboxOOMError,
  SandboxRateLimitedError,
  SandboxRuntimeError,
  SandboxTimeoutError,
  SandboxUnavailableError,
  SandboxValidationError,
  type ValidationIssue,
} from './error-classes.ts';
import { isSandboxError, type SandboxError, type SandboxErrorJSON } from './sandbox-error.ts';

type Rebuild = (message: string, details: JsonObject | undefined) => SandboxError;

function retryAfter(details: JsonObject | undefined): { retryAfterMs?: number } {
  const value = details?.retryAfterMs;
  return typeof value === 'number' ? { retryAfterMs: value } : {};
}

function validationIssues(details: JsonObject | undefined): ValidationIssue[] {
  const issues = details?.issues;
  if (!Array.isArray(issues)) return [];
  return issues.flatMap((issue) => {
    if (typeof issue !== 'object' || issue === null || Array.isArray(issue)) return [];
    const { path, message, received } = issue;
    if (typeof path !== 'string' || typeof message !== 'string' || typeof received !== 'string') {
      return [];
    }
    return [{ path, message, received }];
  });
}

function withoutKeys(details: JsonObject | undefined, keys: string[]): JsonObject | undefined {
  if (details === undefined) return undefined;
  const rest = Object.fromEntries(Object.entries(details).filter(([key]) => !keys.includes(key)));
  return Object.keys(rest).length > 0 ? rest : undefined;
}

function opts(details: JsonObject | undefined) {
  return details === undefined ? {} : { details };
}

const rebuilders: Record<SandboxErrorCode, Rebuild> = {
  TIMEOUT: (message, details) => new SandboxTimeoutError(message, opts(details)),
  OOM: (message, details) => new SandboxOOMError(message, opts(details)),
  VALIDATION: (message, details) =>
    new SandboxValidationError(message, {
      ...opts(withoutKeys(details, ['issues'])),
      issues: validationIssues(details),
    }),
  LIMIT_EXCEEDED: (message, details) => new SandboxLimitExceededError(message, opts(details)),
  RUNTIME: (message, details) => new SandboxRuntimeError(message, opts(details)),
  CAPACITY: (message, details) => new SandboxCapacityError(message, opts(details)),
  RATE_LIMITED: (message, details) =>
    new SandboxRateLimitedError(message, {
      ...opts(withoutKeys(details, ['retryAfterMs'])),
      ...retryAfter(details),
    }),
  BUDGET_EXHAUSTED: (message, details) =>
    new SandboxBudgetExhaustedError(message, {
      ...opts(withoutKeys(details, ['retryAfterMs'])),
      ...retryAfter(details),
    }),
  CANCELLED: (message, details) => new SandboxCancelledError(message, opts(details)),
  CRASH: (message, details) => new SandboxCrashError(message, opts(details)),
  UNAVAILABLE: (message, details) => new SandboxUnavailableError(message, opts(details)),
};

/**
 * Rebuilds an error of the class that matches `json.code` from its plain-JSON form
 * (what `error.toJSON()` gave, possibly after a trip through `JSON.stringify`).
 * An unknown code becomes a `CRASH` error rather than a throw: the wire is not trusted.
 */
export function sandboxErrorFromJSON(json: SandboxErrorJSON): SandboxError {
  const details = isPlainObject(json.details) ? json.details : undefined;
  const message = typeof json.message === 'string' ? json.message : String(json.message);
  if (!isSandboxErrorCode(json.code)) {
    return new SandboxCrashError(`Unknown error code: ${String(json.code)}: ${message}`);
  }
  return rebuilders[json.code](message, details);
}

/**
 * The plain-JSON form of any thrown value: a {@link SandboxError} keeps its code and details;
 * anything else becomes `fallbackCode` (default `CRASH`) with its message.
 */
export function toSandboxErrorJSON(
  error: unknown,
  fallbackCode: SandboxErrorCode = SandboxErrorCode.CRASH,
): SandboxErrorJSON {
  if (isSandboxError(error)) return error.toJSON();
  const message = error instanceof Error ? error.message : String(error);
  return { name: 'SandboxError', code: fallbackCode, message };
}

function isPlainObject(value: unknown): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
