// A budget decision's `used` is the executions counted against the turn. After the store forgot
// the turn (a restart without persistence, a failover to a replica that missed it) its count
// starts again, but this host's ledger still counts what it ran: the answer said 1 of 3 used, and
// the next claim was refused (thisHost).
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { forgetfulStore } from '../../test/faulty-stores.ts';
import { refusal } from '../../test/refusal.ts';
import { createTurnBudgetGuard } from './turn-budget-guard.ts';

describe('used, after the store forgot', () => {
  it('counts what this host’s ledger counts', async () => {
    const { store, forget } = forgetfulStore();
    const budget = createTurnBudgetGuard({ store, maxExecutionsPerTurn: 3 });
    const context = () => ({ executionId: randomUUID(), conversationId: 'c', turnId: 't' });
    await budget.acquire(context());
    await budget.acquire(context());
    forget(); // forgets the turn
    const third = await budget.acquire(context());
    // This host ran 3 executions of the turn: all 3 are used.
    expect(third.decision?.used).toBe(3);
    expect((await refusal(budget.acquire(context()))).details).toMatchObject({ thisHost: true });
  });
});
