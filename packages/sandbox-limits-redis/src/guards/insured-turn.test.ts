// A host whose first execution of a turn was granted by its insurance store (the store down) does
// not know when the turn began elsewhere, so its ledger counts the turn for a whole turnTtlMs from
// there. Once the store answers again it says when the turn ends; the ledger kept its own, later,
// end and refused (thisHost) executions of the next turn that the store admitted.
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { refusal } from '../../test/refusal.ts';
import type { LimitStore } from '../store/limit-store.ts';
import { createMemoryLimitStore } from '../store/memory-store.ts';
import { createTurnBudgetGuard } from './turn-budget-guard.ts';

describe('a turn joined on the insurance store', () => {
  it('ends in the ledger when the store says it ends', async () => {
    const backing = createMemoryLimitStore();
    let down = false;
    const flaky: LimitStore = {
      ...backing,
      kind: 'memory',
      claimBudget: (...args) =>
        down ? Promise.reject(new Error('connection refused')) : backing.claimBudget(...args),
    };
    const options = { store: flaky, maxExecutionsPerTurn: 2, turnTtlMs: 1_000 } as const;
    const hostA = createTurnBudgetGuard(options);
    const hostB = createTurnBudgetGuard({ ...options, failMode: 'insurance' });
    const context = () => ({ executionId: randomUUID(), conversationId: 'c', turnId: 't' });
    // Host A opens the turn on the store: it ends 1 000 ms from now.
    const opened = performance.now();
    await hostA.acquire(context());
    await sleep(400);
    down = true;
    expect((await hostB.acquire(context())).decision).toMatchObject({ insured: true });
    down = false;
    // The store is back: host B's next execution is the turn's second there.
    expect((await hostB.acquire(context())).decision).toMatchObject({ allowed: true, used: 2 });
    expect((await refusal(hostB.acquire(context()))).code).toBe('BUDGET_EXHAUSTED');
    // The store's turn is over; host B ran two executions in it. The next turn admits two.
    await sleep(Math.max(0, opened + 1_050 - performance.now()));
    for (let i = 1; i <= 2; i++) {
      expect((await hostB.acquire(context())).decision).toMatchObject({ allowed: true, used: i });
    }
  });
});
