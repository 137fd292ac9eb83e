// Two SandboxEngine instances stand for two API hosts. Each talks to the same real Redis over its
// own connection through @coda/sandbox-limits-redis guards, so a user's rate limit (tier 4), a
// turn's budget (tier 3) and the per-user concurrency cap hold across both hosts, exactly.
import { randomUUID } from 'node:crypto';
import type { TerminalEvent } from '@coda/sandbox-core';
import { SandboxEngine } from '@coda/sandbox-isolate';
import { createLimitGuards, createRedisLimitStore, fromIoredis } from '@coda/sandbox-limits-redis';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, inject, it, onTestFinished, vi } from 'vitest';
import { asError, asResult } from '../support/events.ts';

const keyPrefix = `it:hosts:${randomUUID()}:`;
const clients: Redis[] = [];
let release: () => void = () => {};
let gate = Promise.resolve();
let holding = 0;

type Limits = Omit<Parameters<typeof createLimitGuards>[0], 'store'>;

/** One API host: its own Redis connection, guards and engine. */
function apiHost(limits: Limits): SandboxEngine {
  const client = new Redis(inject('redisUrl'), { maxRetriesPerRequest: 1 });
  clients.push(client);
  const store = createRedisLimitStore({ client: fromIoredis(client), keyPrefix });
  return new SandboxEngine({
    workers: 1,
    maxConcurrent: 64,
    guards: createLimitGuards({ store, ...limits }),
    // `{ hold: true }` waits until the test opens the gate: an execution kept in flight.
    dataHandler: async (params) => {
      if ((params as { hold?: boolean } | null)?.hold) {
        holding++;
        await gate;
      }
      return 'released';
    },
  });
}

const tiers: Limits = {
  rateLimit: { limit: 6, windowMs: 60_000 },
  turnBudget: { maxExecutionsPerTurn: 4 },
};
const hosts = [apiHost(tiers), apiHost(tiers)] as const;
beforeAll(() => Promise.all(hosts.map((host) => host.ready())));
afterAll(async () => {
  await Promise.all(hosts.map((host) => host.dispose()));
  await Promise.all(clients.map((client) => client.quit()));
});

/** Submits `count` executions alternating between the two hosts, all at once. */
function alternate(
  count: number,
  context: (i: number) => { userId: string; conversationId?: string; turnId?: string },
): Promise<{ host: number; event: TerminalEvent }[]> {
  return Promise.all(
    Array.from({ length: count }, async (_, i) => ({
      host: i % 2,
      event: await hosts[i % 2]!.run({ code: `return ${i}`, context: context(i) }),
    })),
  );
}

function tally(outcomes: { host: number; event: TerminalEvent }[]) {
  const counts: Record<string, number> = {};
  for (const { event } of outcomes) {
    const key = event.type === 'result' ? 'result' : event.code;
    counts[key] = (counts[key] ?? 0) + 1;
  }
  return counts;
}

describe('two API hosts sharing one Redis', () => {
  it('tier 4: a user gets exactly 6 executions per minute across both hosts', async () => {
    const context = (i: number) => ({ userId: 'u-rate', conversationId: `c${i}`, turnId: 't' });
    // One admitted on each host first, then 18 more at once from both.
    asResult(await hosts[0].run({ code: 'return 0', context: context(0) }));
    asResult(await hosts[1].run({ code: 'return 1', context: context(1) }));
    const outcomes = await alternate(18, context);
    expect(tally(outcomes)).toEqual({ result: 4, RATE_LIMITED: 14 });
    for (const { event } of outcomes.filter(({ event }) => event.type === 'error')) {
      const details = asError(event, 'RATE_LIMITED').details;
      expect(details?.retryAfterMs).toBeGreaterThan(0);
      expect(details?.retryAfterMs).toBeLessThanOrEqual(10_000);
    }
    // Another user on the same hosts is untouched.
    asResult(await hosts[1].run({ code: 'return 1', context: { userId: 'u-other', turnId: 't' } }));
  });

  it('tier 3: a turn gets exactly 4 executions across both hosts; a retry of an admitted one counts once', async () => {
    const turn = { userId: 'u-turn', conversationId: 'conv-1', turnId: 'turn-1' };
    const outcomes = await Promise.all(
      Array.from({ length: 5 }, (_, i) =>
        hosts[i % 2]!.run({ code: `return ${i}`, context: { ...turn, executionId: `x${i}` } }),
      ),
    );
    const admitted = outcomes.flatMap((event, i) => (event.type === 'result' ? [i] : []));
    expect(admitted).toHaveLength(4);
    const refused = outcomes.filter((event) => event.type === 'error');
    expect(refused).toHaveLength(1);
    expect(asError(refused[0], 'BUDGET_EXHAUSTED').details?.retryAfterMs).toBeGreaterThan(0);
    // The same execution retried on the other host is not a new execution of the turn.
    const retried = admitted[0]!;
    const retry = await hosts[(retried + 1) % 2]!.run({
      code: 'return "retried"',
      context: { ...turn, executionId: `x${retried}` },
    });
    expect(asResult(retry).payload).toBe('retried');
    // A new execution is refused on both hosts, and a refused attempt costs no rate unit: 5 of
    // the user's 6 are spent (4 executions and the retry), so the next turn gets exactly one.
    for (const host of hosts) {
      asError(
        await host.run({ code: 'return 0', context: { ...turn, executionId: randomUUID() } }),
        'BUDGET_EXHAUSTED',
      );
    }
    const nextTurn = { ...turn, turnId: 'turn-1b' };
    asResult(await hosts[1].run({ code: 'return 1', context: nextTurn }));
    asError(await hosts[0].run({ code: 'return 1', context: nextTurn }), 'RATE_LIMITED');
  });

  it('tier 3 and tier 4 at once: 10 executions of one turn at once give exactly 4; refusals cost no rate unit', async () => {
    const turn = { userId: 'u-both', conversationId: 'conv-2', turnId: 'turn-2' };
    const outcomes = await alternate(10, () => turn);
    const counts = tally(outcomes);
    expect(counts.result).toBe(4);
    // The budget refuses at least the 2 that passed the rate limit with it; others may meet the
    // rate limit before those refunds land.
    expect(counts.BUDGET_EXHAUSTED).toBeGreaterThanOrEqual(2);
    expect((counts.BUDGET_EXHAUSTED ?? 0) + (counts.RATE_LIMITED ?? 0)).toBe(6);
    // Every refused attempt was refunded: the user has spent 4 of 6, so a new turn admits 2.
    const nextTurn = { ...turn, turnId: 'turn-3' };
    const next = await alternate(3, () => nextTurn);
    expect(
      next.map(({ event }) => (event.type === 'result' ? 'result' : event.code)).sort(),
    ).toEqual(['RATE_LIMITED', 'result', 'result']);
  });

  it('concurrency: 2 executions in flight per user across both hosts; a third is refused until one ends', async () => {
    const capped = [0, 1].map(() => apiHost({ concurrency: { maxPerUser: 2 } }));
    onTestFinished(() => Promise.all(capped.map((host) => host.dispose())).then(() => {}));
    gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    const held = [0, 1].map((i) =>
      capped[i]!.run({
        code: 'return await dataProxy.request({ hold: true })',
        context: { userId: 'u-conc', turnId: `held-${i}` },
      }),
    );
    // Once both run (their slots are taken before they start), try from either host.
    await vi.waitFor(() => expect(holding).toBe(2), { timeout: 20_000, interval: 20 });
    for (const host of capped) {
      const refused = asError(
        await host.run({ code: 'return 1', context: { userId: 'u-conc', turnId: randomUUID() } }),
        'RATE_LIMITED',
      );
      expect(refused.details).toMatchObject({ scope: 'user', limit: 2, held: 2 });
    }
    release();
    for (const event of await Promise.all(held)) expect(asResult(event).payload).toBe('released');
    asResult(
      await capped[1]!.run({ code: 'return 1', context: { userId: 'u-conc', turnId: 'after' } }),
    );
  });
});
