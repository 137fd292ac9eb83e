// The host ledger of each guard, on a memory store that can forget everything at once (what a
// Redis restart without persistence or a failover to a replica that missed the writes does) and
// one whose answers take a while: one host never gets more than the limit, and the rate ledger's
// slack keeps it from refusing what the store admitted only because an answer came back late.
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { forgetfulStore, lateFirstAnswer } from '../../test/faulty-stores.ts';
import { refusal } from '../../test/refusal.ts';
import { createMemoryLimitStore } from '../store/memory-store.ts';
import { createConcurrencyGuard } from './concurrency-guard.ts';
import { createRateLimitGuard } from './rate-limit-guard.ts';
import { createTurnBudgetGuard } from './turn-budget-guard.ts';

const context = (userId = 'u') => ({
  executionId: randomUUID(),
  userId,
  conversationId: 'c',
  turnId: 't',
});

describe('the host ledger', () => {
  it('refuses what the store forgot this host was granted: rate, budget, leases', async () => {
    const { store, forget } = forgetfulStore();
    const rate = createRateLimitGuard({ store, limit: 2, windowMs: 60_000, refusalCache: 0 });
    const budget = createTurnBudgetGuard({ store, maxExecutionsPerTurn: 2 });
    const conc = createConcurrencyGuard({ store, maxPerUser: 2 });
    const held = [await conc.acquire(context()), await conc.acquire(context())];
    for (let i = 0; i < 2; i++) {
      await rate.acquire(context());
      await budget.acquire(context());
    }
    forget();
    const rateRefusal = await refusal(rate.acquire(context()));
    expect(rateRefusal.code).toBe('RATE_LIMITED');
    expect(rateRefusal.details).toMatchObject({ thisHost: true });
    const budgetRefusal = await refusal(budget.acquire(context()));
    expect(budgetRefusal.code).toBe('BUDGET_EXHAUSTED');
    expect(budgetRefusal.details).toMatchObject({ thisHost: true, used: 2 });
    const leaseRefusal = await refusal(conc.acquire(context()));
    expect(leaseRefusal.details).toMatchObject({ thisHost: true, held: 2, scope: 'user' });
    // What the ledger refused went back to the store: another host still gets its limit there.
    const elsewhere = createConcurrencyGuard({ store, maxPerUser: 2 });
    const theirs = [await elsewhere.acquire(context()), await elsewhere.acquire(context())];
    const otherRate = createRateLimitGuard({ store, limit: 2, windowMs: 60_000 });
    await otherRate.acquire(context());
    await otherRate.acquire(context());
    // Released here, the slot is free here again.
    await held[0]!.release();
    forget();
    const again = await conc.acquire(context());
    await Promise.all([again, held[1]!, ...theirs].map((lease) => lease.release()));
  });

  it('remembers a user its ledger refused: hammering then costs no store call', async () => {
    const { store, forget, calls } = forgetfulStore();
    const rate = createRateLimitGuard({ store, limit: 2, windowMs: 60_000 });
    await rate.acquire(context());
    await rate.acquire(context());
    forget();
    expect((await refusal(rate.acquire(context()))).details).toMatchObject({
      thisHost: true,
      cached: false,
    });
    const before = calls.rateLimit;
    for (let i = 0; i < 10; i++) {
      expect((await refusal(rate.acquire(context()))).details).toMatchObject({ cached: true });
    }
    expect(calls.rateLimit).toBe(before);
  });

  it('does not refuse a unit the store admitted because its answer came back late', async () => {
    // 1 per second. The first answer takes 300 ms: the ledger counts that unit 300 ms after the
    // store did, so without slack it would refuse the next unit for 300 ms after the store admits.
    const slow = lateFirstAnswer('rateLimit', 300);
    const rate = createRateLimitGuard({ store: slow, limit: 1, windowMs: 1_000, timeoutMs: 1_000 });
    const sent = performance.now();
    await rate.acquire(context());
    await sleep(Math.max(0, sent + 1_030 - performance.now()));
    const next = await rate.acquire(context());
    expect(next.decision?.allowed).toBe(true);
  });

  it('does not refuse a turn the store reset because the first answer came back late', async () => {
    // The first claim's answer takes 300 ms: counted from its arrival, the ledger's turn outlived
    // the store's by 300 ms and refused the retry the store's retryAfterMs invited.
    const slow = lateFirstAnswer('claimBudget', 300);
    const budget = createTurnBudgetGuard({
      store: slow,
      maxExecutionsPerTurn: 1,
      turnTtlMs: 1_000,
      timeoutMs: 1_000,
    });
    await budget.acquire(context());
    const refused = await refusal(budget.acquire(context()));
    expect(refused.details).not.toHaveProperty('thisHost');
    await sleep((refused.details?.retryAfterMs as number) + 30);
    expect((await budget.acquire(context())).decision?.allowed).toBe(true);
  });

  it('forgets a turn it joined late when the store does', async () => {
    // Host A opens the turn; host B's first execution comes 400 ms into its 700 ms. Counted for a
    // whole TTL from there, B's ledger held the turn 400 ms past the store's reset.
    const store = createMemoryLimitStore();
    const hostA = createTurnBudgetGuard({ store, maxExecutionsPerTurn: 2, turnTtlMs: 700 });
    const hostB = createTurnBudgetGuard({ store, maxExecutionsPerTurn: 2, turnTtlMs: 700 });
    await hostA.acquire(context());
    await sleep(400);
    await hostB.acquire(context());
    const refused = await refusal(hostB.acquire(context()));
    expect(refused.details).toMatchObject({ used: 2 });
    await sleep((refused.details?.retryAfterMs as number) + 30);
    expect((await hostB.acquire(context())).decision?.allowed).toBe(true);
    expect((await hostB.acquire(context())).decision?.allowed).toBe(true);
  });
});
