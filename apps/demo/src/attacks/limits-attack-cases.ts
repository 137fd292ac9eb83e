// Hammering across conversations and hosts: the guards of tiers 3 and 4 on the shared store
// (memory, or Redis with REDIS_URL — where every host of a deployment would see the same counts).
import { randomUUID } from 'node:crypto';
import { acquireGuards, type ExecutionGuard, isSandboxError } from '@coda/sandbox-core';
import { createRateLimitGuard, createTurnBudgetGuard } from '@coda/sandbox-limits-redis';
import type { DemoResources } from '../compose/resources.ts';
import type { AttackCase, AttackResult } from './attack-case.ts';

interface Attempt {
  conversationId: string;
  turnId: string;
}

/** Tries every attempt for one fresh user; contained when exactly `expectAdmitted` got in. */
async function hammer(
  guard: ExecutionGuard,
  attempts: readonly Attempt[],
  expectAdmitted: number,
  expectCode: string,
): Promise<AttackResult> {
  const userId = `attacker-${randomUUID()}`;
  let admitted = 0;
  const refusals = new Set<string>();
  await Promise.all(
    attempts.map(async (attempt) => {
      try {
        const lease = await acquireGuards([guard], {
          executionId: randomUUID(),
          userId,
          ...attempt,
        });
        admitted++;
        await lease.release();
      } catch (error) {
        refusals.add(isSandboxError(error) ? error.code : 'unexpected error');
      }
    }),
  );
  const codes = [...refusals].join(', ');
  return {
    contained: admitted === expectAdmitted && codes === expectCode,
    outcome: `${codes || 'none refused'} (${admitted}/${attempts.length} admitted)`,
  };
}

const spread = (count: number, conversations: number): Attempt[] =>
  Array.from({ length: count }, (_, index) => ({
    conversationId: `conversation-${index % conversations}`,
    turnId: `turn-${index}`,
  }));

async function store(resources: DemoResources) {
  return (await resources.limitStore()).store;
}

/** Tier 4 against 20 parallel attempts over 4 conversations; tier 3 against 6 in one turn. */
export const limitsAttackCases: readonly AttackCase[] = [
  {
    attack: 'hammering across conversations (tier 4)',
    layer: 'limits',
    async run(resources) {
      const guard = createRateLimitGuard({
        store: await store(resources),
        name: 'demo-attack-rate',
        limit: 5,
        windowMs: 60_000,
      });
      return hammer(guard, spread(20, 4), 5, 'RATE_LIMITED');
    },
  },
  {
    attack: 'executions piled into one turn (tier 3)',
    layer: 'limits',
    async run(resources) {
      const guard = createTurnBudgetGuard({
        store: await store(resources),
        name: 'demo-attack-turn',
        maxExecutionsPerTurn: 3,
      });
      const turn = { conversationId: `conversation-${randomUUID()}`, turnId: 'turn-1' };
      return hammer(guard, Array(6).fill(turn), 3, 'BUDGET_EXHAUSTED');
    },
  },
];
