// A decision's `remaining` is the checks that would still be admitted right now. After the store
// forgot this host's units (a restart without persistence, a failover to a replica that missed
// them) the store's figure counts a full bucket, but this host's ledger refuses sooner: the
// answer said 1 remaining and the next check was refused (thisHost).
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { forgetfulStore } from '../../test/faulty-stores.ts';
import { refusal } from '../../test/refusal.ts';
import { createRateLimitGuard } from './rate-limit-guard.ts';

describe('remaining, after the store forgot', () => {
  it('counts what this host’s ledger would still admit', async () => {
    const { store, forget } = forgetfulStore();
    // 3 per minute, burst 3; a 20 ms slack is far below the 20 s a unit takes to refill.
    const rate = createRateLimitGuard({ store, limit: 3, windowMs: 60_000, timeoutMs: 20 });
    const context = () => ({ executionId: randomUUID(), userId: 'u' });
    await rate.acquire(context());
    forget(); // forgets the unit
    const second = await rate.acquire(context());
    // This host has had 2 of its 3: one more would be admitted, not two.
    expect(second.decision?.remaining).toBe(1);
    await rate.acquire(context());
    expect((await refusal(rate.acquire(context()))).details).toMatchObject({ thisHost: true });
  });
});
