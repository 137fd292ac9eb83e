import { isSandboxError, type SandboxValidationError } from '@coda/sandbox-core';
import { describe, expect, it } from 'vitest';
import { createRedisLimitStore } from '../redis/redis-store.ts';
import { fromIoredis, fromNodeRedis } from '../redis/script-client.ts';
import { createMemoryLimitStore } from '../store/memory-store.ts';
import { createConcurrencyGuard } from './concurrency-guard.ts';
import { createLimitGuards } from './limit-guards.ts';
import { createRateLimitGuard } from './rate-limit-guard.ts';
import { createTurnBudgetGuard } from './turn-budget-guard.ts';

function validationError(run: () => unknown): SandboxValidationError {
  try {
    run();
  } catch (error) {
    if (isSandboxError(error) && error.code === 'VALIDATION')
      return error as SandboxValidationError;
    throw error;
  }
  throw new Error('expected a VALIDATION error');
}

const store = createMemoryLimitStore();

describe('guard options', () => {
  it('names every bad field of a rate-limit guard at once', () => {
    const error = validationError(() =>
      createRateLimitGuard({
        store,
        limit: 0,
        windowMs: Number.NaN,
        failMode: 'maybe' as never,
        name: 'has space',
        extra: 1,
      } as never),
    );
    expect(error.issues.map((issue) => issue.path).sort()).toEqual([
      'extra',
      'failMode',
      'limit',
      'name',
      'windowMs',
    ]);
    expect(error.issues.find((issue) => issue.path === 'windowMs')?.received).toBe('NaN');
  });

  it('refuses something that is not a store, and rates above 1 000 per millisecond', () => {
    expect(
      validationError(() => createRateLimitGuard({ store: {} as never, limit: 1, windowMs: 1 }))
        .issues[0]?.path,
    ).toBe('store');
    expect(
      validationError(() => createRateLimitGuard({ store, limit: 1_000_000, windowMs: 10 }))
        .issues[0]?.path,
    ).toBe('limit');
  });

  it('checks turn-budget and concurrency options', () => {
    const budget = validationError(() =>
      createTurnBudgetGuard({ store, maxExecutionsPerTurn: 1.5, turnTtlMs: -1 }),
    );
    expect(budget.issues.map((issue) => issue.path)).toEqual(['maxExecutionsPerTurn', 'turnTtlMs']);
    const concurrency = validationError(() =>
      createConcurrencyGuard({ store, maxPerUser: 2, leaseTtlMs: 1_000, renewEveryMs: 1_000 }),
    );
    expect(concurrency.issues.map((issue) => issue.path)).toEqual(['renewEveryMs']);
    expect(
      validationError(() => createConcurrencyGuard({ store, maxPerUser: 1, leaseTtlMs: 50 }))
        .issues[0]?.path,
    ).toBe('leaseTtlMs');
  });

  it('checks the client an adapter is given, and memory store options', () => {
    const nodeRedisLike = { evalSha() {}, eval() {} };
    const ioredisLike = { evalsha() {}, eval() {} };
    expect(validationError(() => fromIoredis(nodeRedisLike as never)).message).toContain(
      'fromNodeRedis',
    );
    expect(validationError(() => fromNodeRedis(ioredisLike as never)).message).toContain(
      'fromIoredis',
    );
    expect(validationError(() => createMemoryLimitStore({ now: 5 } as never)).issues[0]?.path).toBe(
      'now',
    );
  });

  it('checks Redis store options: an adapted client and a prefix without braces', () => {
    const error = validationError(() =>
      createRedisLimitStore({ client: { get() {} } as never, keyPrefix: 'app:{x}:' }),
    );
    expect(error.issues.map((issue) => issue.path)).toEqual(['client', 'keyPrefix']);
  });
});

describe('execution context', () => {
  it('refuses a malformed context and a missing id with VALIDATION naming the field', async () => {
    const guard = createRateLimitGuard({ store, limit: 5, windowMs: 1_000 });
    const noUser = await guard.acquire({ executionId: 'e' }).catch((error: unknown) => error);
    expect(noUser).toMatchObject({ code: 'VALIDATION', issues: [{ path: 'userId' }] });
    const bad = await guard
      .acquire({ executionId: '', userId: 7 } as never)
      .catch((error: unknown) => error);
    expect(bad).toMatchObject({ code: 'VALIDATION' });
    expect((bad as SandboxValidationError).issues.map((issue) => issue.path)).toEqual([
      'executionId',
      'userId',
    ]);
  });

  it('refuses a context that throws when read with VALIDATION, and copies what it reads', async () => {
    const guard = createRateLimitGuard({ store, limit: 5, windowMs: 1_000 });
    const getter = {
      executionId: 'e',
      get userId(): string {
        throw new Error('boom');
      },
    };
    const proxy = new Proxy(
      {},
      {
        ownKeys() {
          throw new Error('trap');
        },
      },
    );
    for (const context of [getter, proxy]) {
      const error = await guard.acquire(context as never).catch((reason: unknown) => reason);
      expect(error).toMatchObject({ code: 'VALIDATION', issues: [{ path: '' }] });
    }
    let reads = 0;
    const shifty = {
      executionId: 'e',
      get userId() {
        reads++;
        return reads === 1 ? 'alice' : 7;
      },
    };
    const lease = await guard.acquire(shifty as never);
    expect(lease.decision?.allowed).toBe(true);
    expect(reads).toBe(1);
  });

  it('admits executions without the id when told to', async () => {
    const rate = createRateLimitGuard({ store, limit: 1, windowMs: 1_000, whenNoUser: 'allow' });
    const budget = createTurnBudgetGuard({ store, maxExecutionsPerTurn: 1, whenNoTurn: 'allow' });
    const conc = createConcurrencyGuard({ store, maxPerUser: 1, whenNoUser: 'allow' });
    for (let i = 0; i < 3; i++) {
      expect((await rate.acquire({ executionId: `${i}` })).decision).toBeUndefined();
      expect((await budget.acquire({ executionId: `${i}` })).decision).toBeUndefined();
      await conc.acquire({ executionId: `${i}` });
    }
  });

  it('refuses with CANCELLED when the signal is already aborted', async () => {
    const guard = createRateLimitGuard({ store, limit: 5, windowMs: 1_000 });
    const error = await guard
      .acquire({ executionId: 'e', userId: 'u' }, AbortSignal.abort())
      .catch((reason: unknown) => reason);
    expect(error).toMatchObject({ code: 'CANCELLED' });
  });
});

describe('createLimitGuards', () => {
  it('makes one guard for the limits given, sharing the store', async () => {
    const guards = createLimitGuards({
      store,
      turnBudget: { maxExecutionsPerTurn: 1 },
      rateLimit: { limit: 5, windowMs: 1_000 },
      concurrency: { maxPerUser: 2 },
    });
    expect(guards.map((guard) => guard.name)).toEqual(['concurrency+rate-limit+turn-budget']);
    const [none] = createLimitGuards({ store });
    expect(none?.name).toBe('limits');
    const lease = await none!.acquire({ executionId: 'e' });
    expect(lease).toMatchObject({ rate: undefined, budget: undefined });
    await lease.release();
  });

  it('names the section of a bad field', () => {
    const error = validationError(() =>
      createLimitGuards({ store, rateLimit: { limit: -1, windowMs: 1_000 } }),
    );
    expect(error.issues.map((issue) => issue.path)).toEqual(['rateLimit.limit']);
    expect(
      validationError(() => createLimitGuards({ store: 5 as never })).issues.map((i) => i.path),
    ).toEqual(['store']);
  });
});
