import { describe, expect, it } from 'vitest';
import { SandboxValidationError } from '../errors/error-classes.ts';
import { isSandboxError } from '../errors/sandbox-error.ts';
import {
  defaultBridgeLimits,
  defaultExecutionLimits,
  defaultIsolateLimits,
  resolveExecutionLimits,
} from './execution-limits.ts';

function rejection(run: () => unknown): SandboxValidationError {
  try {
    run();
  } catch (error) {
    expect(error).toBeInstanceOf(SandboxValidationError);
    return error as SandboxValidationError;
  }
  throw new Error('expected a SandboxValidationError');
}

describe('execution limits defaults', () => {
  it('are the seed tier 1 values', () => {
    expect(defaultIsolateLimits).toEqual({
      memoryMb: 256,
      timeoutMs: 30_000,
      maxCodeBytes: 524_288,
      maxTimers: 100,
    });
  });

  it('are the seed tier 2 values, plus a 1 MiB status byte cap', () => {
    expect(defaultBridgeLimits).toEqual({
      maxDataRequests: 20,
      maxDataBytes: 52_428_800,
      maxRequestBytes: 1_048_576,
      maxRequestValues: 100_000,
      maxResultBytes: 5_242_880,
      maxStatusEvents: 1_000,
      maxConsoleCalls: 1_000,
      maxStatusBytes: 1_048_576,
    });
  });

  it('cannot be changed by a caller', () => {
    expect(Object.isFrozen(defaultExecutionLimits)).toBe(true);
  });
});

describe('resolveExecutionLimits', () => {
  it('returns the defaults when given nothing', () => {
    expect(resolveExecutionLimits()).toEqual(defaultExecutionLimits);
    expect(resolveExecutionLimits({})).toEqual(defaultExecutionLimits);
  });

  it('merges given fields over the defaults', () => {
    expect(resolveExecutionLimits({ memoryMb: 8, maxStatusEvents: 100 })).toEqual({
      ...defaultExecutionLimits,
      memoryMb: 8,
      maxStatusEvents: 100,
    });
  });

  it('merges over a given base instead of the defaults', () => {
    const base = { ...defaultExecutionLimits, timeoutMs: 1_000 };
    expect(resolveExecutionLimits({ memoryMb: 16 }, base)).toEqual({ ...base, memoryMb: 16 });
  });

  it('keeps the base for fields given as undefined', () => {
    const partial = { timeoutMs: undefined } as unknown as { timeoutMs: number };
    expect(resolveExecutionLimits(partial).timeoutMs).toBe(30_000);
  });

  it('accepts zero where zero means "none allowed"', () => {
    expect(resolveExecutionLimits({ maxDataRequests: 0, maxStatusEvents: 0 })).toMatchObject({
      maxDataRequests: 0,
      maxStatusEvents: 0,
    });
  });

  it('names every bad field and the value it got, in one error', () => {
    const error = rejection(() =>
      resolveExecutionLimits({
        memoryMb: -1,
        timeoutMs: Number.NaN,
        maxCodeBytes: 'big' as unknown as number,
        maxResultBytes: 1.5,
        bogus: true,
      } as never),
    );
    expect(error.code).toBe('VALIDATION');
    expect(isSandboxError(error)).toBe(true);
    expect(error.issues.map(({ path, received }) => ({ path, received }))).toEqual([
      { path: 'memoryMb', received: '-1' },
      { path: 'timeoutMs', received: 'NaN' },
      { path: 'maxCodeBytes', received: '"big"' },
      { path: 'maxResultBytes', received: '1.5' },
      { path: 'bogus', received: 'true' },
    ]);
    expect(error.issues.find((issue) => issue.path === 'bogus')?.message).toBe('unknown option');
    for (const field of ['memoryMb', 'timeoutMs', 'maxCodeBytes', 'maxResultBytes', 'bogus']) {
      expect(error.message).toContain(field);
    }
    expect(error.message).toContain('got NaN');
    expect(error.details).toEqual({ issues: error.issues });
  });

  it('rejects a memory limit below isolated-vm’s 8 MiB minimum', () => {
    const error = rejection(() => resolveExecutionLimits({ memoryMb: 4 }));
    expect(error.issues).toEqual([
      { path: 'memoryMb', message: expect.stringContaining('8'), received: '4' },
    ]);
  });

  it('rejects Infinity, negative counts and a timer beyond setTimeout’s range', () => {
    const error = rejection(() =>
      resolveExecutionLimits({
        maxDataBytes: Number.POSITIVE_INFINITY,
        maxDataRequests: -5,
        timeoutMs: 2 ** 31,
      }),
    );
    expect(error.issues.map((issue) => issue.path)).toEqual([
      'timeoutMs',
      'maxDataRequests',
      'maxDataBytes',
    ]);
  });

  it('rejects a non-object', () => {
    const error = rejection(() => resolveExecutionLimits(42 as never));
    expect(error.issues).toEqual([{ path: '', message: expect.any(String), received: '42' }]);
    expect(error.message).toContain('(root)');
  });

  it('describes hostile values without calling their methods', () => {
    const hostile = {
      toString() {
        throw new Error('must not be called');
      },
    };
    const error = rejection(() => resolveExecutionLimits({ memoryMb: hostile } as never));
    expect(error.issues[0]).toMatchObject({ path: 'memoryMb', received: '[object]' });
  });

  it('caps the length of a described value', () => {
    const error = rejection(() =>
      resolveExecutionLimits({ memoryMb: 'x'.repeat(10_000) } as never),
    );
    expect(error.issues[0]?.received.length).toBeLessThanOrEqual(81);
  });
});
