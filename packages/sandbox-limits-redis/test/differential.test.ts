// The in-memory store and the Redis store must answer alike. Random sequences of operations run
// against both, one after the other, and every answer is compared. Windows and TTLs are an hour
// long, so the few milliseconds between the two runs cannot change a count; the time-derived
// fields (resetMs, retryAfterMs) are compared within a tolerance.
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import {
  createMemoryLimitStore,
  createRedisLimitStore,
  fromIoredis,
  type LimitStore,
} from '../src/index.ts';

/** mulberry32: a small seeded generator, so a failing sequence can be replayed from its seed. */
function random(seed: number) {
  let state = seed >>> 0;
  return (below: number) => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return Math.floor((((t ^ (t >>> 14)) >>> 0) / 4_294_967_296) * below);
  };
}

type Operation = (store: LimitStore) => Promise<unknown>;

const hour = 3_600_000;
const rules = [
  { limit: 3, windowMs: hour, burst: 3 },
  { limit: 5, windowMs: hour, burst: 2 },
  { limit: 1, windowMs: hour, burst: 1 },
];

function operations(seed: number, count: number): { label: string; run: Operation }[] {
  const next = random(seed);
  const keys = ['{=a}', '{=b}', '{#x}'];
  return Array.from({ length: count }, () => {
    const key = keys[next(keys.length)]!;
    const member = `m${next(6)}`;
    const rule = rules[next(rules.length)]!;
    const limit = 1 + next(3);
    switch (next(5)) {
      case 0:
        return {
          label: `rate ${key} ${rule.limit}/${rule.burst}`,
          run: (s) => s.rateLimit(`r${rule.limit}:${key}`, rule),
        };
      case 1:
        return {
          label: `refund ${key} ${rule.limit}`,
          run: (s) => s.refundRate(`r${rule.limit}:${key}`, rule),
        };
      case 2:
        return {
          label: `budget ${key} ${member} ${limit}`,
          run: (s) => s.claimBudget(`b:${key}`, member, limit, hour),
        };
      case 3:
        return {
          label: `lease ${key} ${member} ${limit}`,
          run: (s) => s.acquireLease(`l:${key}`, member, limit, hour),
        };
      default:
        return {
          label: `release ${key} ${member}`,
          run: (s) => s.releaseLease(`l:${key}`, member),
        };
    }
  });
}

const timeFields = ['resetMs', 'retryAfterMs'];

/** The answer without its time-derived fields, and those fields apart. */
function split(answer: unknown): { counts: unknown; times: number[] } {
  if (typeof answer !== 'object' || answer === null) return { counts: answer, times: [] };
  const counts: Record<string, unknown> = { ...answer };
  // A field the answer lacks counts as 0 on both sides (leases have no resetMs).
  const times = timeFields.map((field) => (counts[field] as number | undefined) ?? 0);
  for (const field of timeFields) delete counts[field];
  return { counts, times };
}

describe('memory and Redis stores answer alike', () => {
  let client: Redis;
  beforeAll(() => {
    const url = new URL(inject('redisUrl'));
    client = new Redis({ host: url.hostname, port: Number(url.port || 6379) });
  });
  afterAll(async () => {
    await client?.quit();
  });

  it('on 60 random sequences of 40 operations', async () => {
    for (let seed = 1; seed <= 60; seed++) {
      const memory = createMemoryLimitStore();
      const redis = createRedisLimitStore({
        client: fromIoredis(client),
        keyPrefix: `test:diff:${randomUUID()}:`,
      });
      const sequence = operations(seed, 40);
      for (const [index, { label, run }] of sequence.entries()) {
        const [fromMemory, fromRedis] = [split(await run(memory)), split(await run(redis))];
        const where = `seed ${seed}, step ${index}: ${label}`;
        expect(fromRedis.counts, where).toEqual(fromMemory.counts);
        // The two runs are a few milliseconds apart (seconds on a stalled machine).
        fromRedis.times.forEach((time, i) => {
          expect(Math.abs(time - fromMemory.times[i]!), where).toBeLessThanOrEqual(5_000);
        });
      }
    }
  });
});
