// Review: a refusal is not cached when a refund happened on this host while the check was in
// flight (test/refund-race.test.ts), but the check compared one counter of every refund: a refund
// of any *other* user made the refusal uncached too. On a busy host refunds happen all the time
// (createLimitGuards refunds whenever a later limit refuses), and a user hammering a refused limit
// then went to the store on every attempt, which the cache exists to prevent.
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { createMemoryLimitStore, createRateLimitGuard, type LimitStore } from '../src/index.ts';

describe('the refusal cache, with other users refunded meanwhile', () => {
  it('caches a refusal whose user was not refunded', async () => {
    const backing = createMemoryLimitStore();
    const checksOf = new Map<string, number>();
    const store: LimitStore = {
      ...backing,
      kind: 'memory',
      rateLimit: (key, rule) => {
        checksOf.set(key, (checksOf.get(key) ?? 0) + 1);
        return backing.rateLimit(key, rule);
      },
    };
    // 1 per minute: a refused user stays refused (cached) for about 60 s.
    const guard = createRateLimitGuard({ store, limit: 1, windowMs: 60_000 });
    const hammer = `hammer-${randomUUID()}`;
    await guard.acquire({ executionId: randomUUID(), userId: hammer });
    for (let i = 0; i < 10; i++) {
      // Another user's unit, refunded while the hammering user's check is in flight.
      const other = await guard.acquire({ executionId: randomUUID(), userId: randomUUID() });
      const check = guard.acquire({ executionId: randomUUID(), userId: hammer }).catch(() => {});
      await other.refund();
      await check;
    }
    const hammerChecks = [...checksOf].find(([key]) => key.includes(hammer))?.[1];
    // The admission and the first refusal reach the store; the nine attempts after are refused
    // from the cache (nothing of the hammering user was refunded).
    expect(hammerChecks).toBe(2);
  });
});
