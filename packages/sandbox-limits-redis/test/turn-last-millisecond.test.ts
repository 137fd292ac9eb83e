// A host whose first claim of a turn lands in the turn's last millisecond on Redis: PTTL answers 0
// (the key lives while its expiry is not past), and the ledger took 0 for "unknown" and counted
// the turn for a whole turnTtlMs from there, refusing (thisHost) what the store admitted in the
// next turn. The moment is hit by trying: each attempt is a new host claiming a turn created to
// expire a few milliseconds later.
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createRedisLimitStore, createTurnBudgetGuard, fromIoredis } from '../src/index.ts';

describe('a turn joined in its last millisecond', () => {
  let client: Redis;
  beforeAll(async () => {
    const url = new URL(inject('redisUrl'));
    client = new Redis({ host: url.hostname, port: Number(url.port || 6379) });
    await once(client, 'ready');
  });
  afterAll(() => client?.quit());

  it('is forgotten by the ledger when the store forgets it', async () => {
    const keyPrefix = `test:${randomUUID()}:`;
    const store = createRedisLimitStore({ client: fromIoredis(client), keyPrefix });
    const host = () =>
      createTurnBudgetGuard({ store, maxExecutionsPerTurn: 2, turnTtlMs: 3_600_000 });
    let joinedLate: ReturnType<typeof host> | undefined;
    let turnId = '';
    for (let turn = 0; turn < 50 && joinedLate === undefined; turn++) {
      turnId = `turn-${randomUUID()}`;
      // Another host counted execution 'first' in the turn, which ends 5 ms from now; each
      // candidate host is asked to retry it (admitted again, counted once on the store, and
      // counted in the candidate's ledger, whose turn starts there).
      const key = `${keyPrefix}turn-budget:turn:{=c|=${turnId}}`;
      await client.multi().sadd(key, '=first').pexpire(key, 5).exec();
      // (Once the turn is over, a claim opens a new one: the loop ends by the clock instead.)
      const until = performance.now() + 10;
      while (performance.now() < until && joinedLate === undefined) {
        const candidate = host();
        const lease = await candidate
          .acquire({ executionId: 'first', conversationId: 'c', turnId })
          .catch(() => undefined);
        if (lease?.decision?.alreadyCounted && lease.decision.resetMs === 0) joinedLate = candidate;
      }
    }
    expect(joinedLate).toBeDefined();
    await sleep(5);
    // The store's turn is over: a new one admits two executions, on this host too (which ran one
    // execution, 'first', in the turn before).
    for (let i = 0; i < 2; i++) {
      const lease = await joinedLate!.acquire({
        executionId: randomUUID(),
        conversationId: 'c',
        turnId,
      });
      expect(lease.decision).toMatchObject({ allowed: true, used: i + 1 });
    }
  });
});
