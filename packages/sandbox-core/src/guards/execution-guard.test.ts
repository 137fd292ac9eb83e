import { describe, expect, it } from 'vitest';
import { SandboxRateLimitedError } from '../errors/error-classes.ts';
import { isSandboxError } from '../errors/sandbox-error.ts';
import {
  acquireGuards,
  type ExecutionContext,
  ExecutionContextSchema,
  type ExecutionGuard,
} from './execution-guard.ts';

const context: ExecutionContext = { executionId: 'x1', userId: 'u1', turnId: 't1' };

function recordingGuard(name: string, log: string[], refuse?: unknown): ExecutionGuard {
  return {
    name,
    async acquire() {
      if (refuse !== undefined) throw refuse;
      log.push(`acquire ${name}`);
      return {
        async release() {
          log.push(`release ${name}`);
        },
      };
    },
  };
}

describe('acquireGuards', () => {
  it('acquires in order and releases in reverse', async () => {
    const log: string[] = [];
    const lease = await acquireGuards(
      [recordingGuard('a', log), recordingGuard('b', log)],
      context,
    );
    await lease.release();
    await lease.release();
    expect(log).toEqual(['acquire a', 'acquire b', 'release b', 'release a']);
  });

  it('releases what it took when a later guard refuses, and rethrows the refusal', async () => {
    const log: string[] = [];
    const refusal = new SandboxRateLimitedError('slow down', { retryAfterMs: 10 });
    const guards = [recordingGuard('a', log), recordingGuard('b', log, refusal)];
    await expect(acquireGuards(guards, context)).rejects.toBe(refusal);
    expect(log).toEqual(['acquire a', 'release a']);
  });

  it('fails closed with UNAVAILABLE when a guard breaks', async () => {
    const log: string[] = [];
    const broken = recordingGuard('redis', log, new Error('ECONNREFUSED'));
    const error = await acquireGuards([broken], context).catch((caught: unknown) => caught);
    expect(isSandboxError(error)).toBe(true);
    expect(error).toMatchObject({
      code: 'UNAVAILABLE',
      message: 'Guard redis failed: ECONNREFUSED',
      details: { guard: 'redis' },
    });
  });

  it('admits everything with no guards', async () => {
    await expect((await acquireGuards([], context)).release()).resolves.toBeUndefined();
  });
});

describe('ExecutionContextSchema', () => {
  it('accepts identifiers of any content', () => {
    const hostile = { executionId: '{x}:\n😀'.repeat(2_000), userId: '__proto__' };
    expect(ExecutionContextSchema.parse(hostile)).toEqual(hostile);
  });

  it('refuses an empty execution id and unknown keys', () => {
    expect(ExecutionContextSchema.safeParse({ executionId: '' }).success).toBe(false);
    expect(ExecutionContextSchema.safeParse({ executionId: 'a', user: 'b' }).success).toBe(false);
  });
});
