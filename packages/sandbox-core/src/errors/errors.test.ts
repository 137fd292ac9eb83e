import vm from 'node:vm';
import { describe, expect, it } from 'vitest';
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
} from './error-classes.ts';
import { isSandboxError, SandboxError } from './sandbox-error.ts';
import { sandboxErrorFromJSON, toSandboxErrorJSON } from './serialize.ts';

const oneOfEach = [
  new SandboxTimeoutError('too slow', { details: { timeoutMs: 100 } }),
  new SandboxOOMError(),
  new SandboxValidationError('bad', {
    issues: [{ path: 'memoryMb', message: 'too small', received: '-1' }],
  }),
  new SandboxLimitExceededError('too many requests', { details: { limit: 20 } }),
  new SandboxRuntimeError('boom'),
  new SandboxCapacityError('IsolateManager at capacity (4)', { details: { maxConcurrent: 4 } }),
  new SandboxRateLimitedError('slow down', { retryAfterMs: 1_500 }),
  new SandboxBudgetExhaustedError('turn budget spent', { retryAfterMs: 60_000 }),
  new SandboxCancelledError(),
  new SandboxCrashError('worker died', { details: { signal: 'SIGKILL' } }),
  new SandboxUnavailableError('redis down'),
];

describe('error codes', () => {
  it('are a closed table whose keys equal their values', () => {
    for (const [key, value] of Object.entries(SandboxErrorCode)) expect(key).toBe(value);
    expect(Object.keys(SandboxErrorCode)).toEqual([
      'TIMEOUT',
      'OOM',
      'VALIDATION',
      'LIMIT_EXCEEDED',
      'RUNTIME',
      'CAPACITY',
      'RATE_LIMITED',
      'BUDGET_EXHAUSTED',
      'CANCELLED',
      'CRASH',
      'UNAVAILABLE',
    ]);
    expect(isSandboxErrorCode('TIMEOUT')).toBe(true);
    expect(isSandboxErrorCode('timeout')).toBe(false);
    expect(isSandboxErrorCode(undefined)).toBe(false);
  });

  it('give one subclass per code, each with its name', () => {
    expect(oneOfEach.map((error) => error.code)).toEqual(Object.values(SandboxErrorCode));
    for (const error of oneOfEach) {
      expect(error).toBeInstanceOf(SandboxError);
      expect(error).toBeInstanceOf(Error);
      expect(error.name).toBe(error.constructor.name);
    }
  });
});

describe('SandboxError', () => {
  it('keeps its cause', () => {
    const cause = new Error('root');
    const error = new SandboxCrashError('wrapped', { cause });
    expect(error.cause).toBe(cause);
    expect('cause' in new SandboxCrashError('no cause')).toBe(false);
  });

  it('puts retryAfterMs on the error and in its details', () => {
    const error = new SandboxRateLimitedError('slow down', {
      retryAfterMs: 250,
      details: { limit: 10 },
    });
    expect(error.retryAfterMs).toBe(250);
    expect(error.details).toEqual({ limit: 10, retryAfterMs: 250 });
  });
});

describe('serialization', () => {
  it.each(oneOfEach.map((error) => [error.code, error] as const))(
    '%s survives a round trip through JSON text',
    (_code, error) => {
      const wire = JSON.parse(JSON.stringify(error));
      expect(wire).toEqual(error.toJSON());
      const rebuilt = sandboxErrorFromJSON(wire);
      expect(rebuilt.constructor).toBe(error.constructor);
      expect(rebuilt.toJSON()).toEqual(error.toJSON());
    },
  );

  it('restores the typed fields of validation and retryable errors', () => {
    const validation = sandboxErrorFromJSON(oneOfEach[2]!.toJSON()) as SandboxValidationError;
    expect(validation.issues).toEqual([{ path: 'memoryMb', message: 'too small', received: '-1' }]);
    const limited = sandboxErrorFromJSON(oneOfEach[6]!.toJSON()) as SandboxRateLimitedError;
    expect(limited.retryAfterMs).toBe(1_500);
  });

  it('has a plain-JSON form with only name, code, message and details', () => {
    expect(new SandboxTimeoutError('too slow', { details: { timeoutMs: 5 } }).toJSON()).toEqual({
      name: 'SandboxTimeoutError',
      code: 'TIMEOUT',
      message: 'too slow',
      details: { timeoutMs: 5 },
    });
    expect(new SandboxOOMError().toJSON()).toEqual({
      name: 'SandboxOOMError',
      code: 'OOM',
      message: 'Execution ran out of memory',
    });
  });

  it('turns an unknown code from the wire into a CRASH error instead of throwing', () => {
    const rebuilt = sandboxErrorFromJSON({ name: 'X', code: 'NOPE' as never, message: 'm' });
    expect(rebuilt.code).toBe('CRASH');
    expect(rebuilt.message).toContain('NOPE');
  });

  it('serializes any thrown value, with a fallback code', () => {
    expect(toSandboxErrorJSON(new TypeError('x is not a function'), 'RUNTIME')).toEqual({
      name: 'SandboxError',
      code: 'RUNTIME',
      message: 'x is not a function',
    });
    expect(toSandboxErrorJSON('a string')).toMatchObject({ code: 'CRASH', message: 'a string' });
    expect(toSandboxErrorJSON(new SandboxOOMError()).code).toBe('OOM');
  });
});

describe('isSandboxError', () => {
  it('accepts every subclass and refuses look-alikes', () => {
    for (const error of oneOfEach) expect(isSandboxError(error)).toBe(true);
    expect(isSandboxError(new Error('plain'))).toBe(false);
    expect(isSandboxError({ code: 'TIMEOUT', message: 'fake' })).toBe(false);
    expect(isSandboxError(null)).toBe(false);
    expect(isSandboxError('TIMEOUT')).toBe(false);
  });

  it('recognises a SandboxError made in another realm, where instanceof fails', () => {
    const context = vm.createContext({});
    // The same class source, evaluated in the other realm: its Error and prototypes are that realm's.
    const foreign = vm.runInContext(
      `const sandboxErrorBrand = Symbol.for('@coda/sandbox-core/SandboxError');
       const options = undefined;
       (${SandboxError.toString()});`,
      context,
    ) as typeof SandboxError;
    const error = new foreign('TIMEOUT', 'from another realm');
    expect(error instanceof SandboxError).toBe(false);
    expect(error instanceof Error).toBe(false);
    expect(isSandboxError(error)).toBe(true);
    expect(error.code).toBe('TIMEOUT');
  });

  it('refuses a branded object from another realm whose code is not in the table', () => {
    const forged = vm.runInContext(
      `({ [Symbol.for('@coda/sandbox-core/SandboxError')]: true, code: 'ROOT' })`,
      vm.createContext({}),
    );
    expect(isSandboxError(forged)).toBe(false);
  });
});
