// Attack review 35 (concurrency leases). Real Redis (the run's standalone server); host A's store
// is wrapped only to delay one answer (Redis runs the command at once, the reply comes late).
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import {
  createConcurrencyGuard,
  createRedisLimitStore,
  fromIoredis,
  type LimitStore,
} from '../src/index.ts';
import { refusal } from './refusal.ts';
import { warningRecorder } from './warning-recorder.ts';

describe('attack 35: leases', () => {
  const url = new URL(inject('redisUrl'));
  const target = { host: url.hostname, port: Number(url.port || 6379) };
  const clients: Redis[] = [];
  const connect = async () => {
    const client = new Redis({ ...target, maxRetriesPerRequest: 1 });
    clients.push(client);
    await once(client, 'ready');
    return client;
  };
  beforeAll(async () => {
    await connect();
  });
  afterAll(async () => {
    await Promise.all(clients.map((client) => client.quit().catch(() => {})));
  });

  /** Host A's store: Redis runs each acquisition at once; the first answer for a key ending in
   * `suffix` reaches host A `delayMs` late (a slow link to that key's node). */
  const slowFirstAnswer = (shared: LimitStore, suffix: string, delayMs: number): LimitStore => {
    let delay = delayMs;
    return {
      ...shared,
      kind: 'redis',
      acquireLease: async (key, member, limit, ttlMs) => {
        const answer = await shared.acquireLease(key, member, limit, ttlMs);
        if (key.endsWith(suffix) && delay > 0) {
          const wait = delay;
          delay = 0;
          await sleep(wait);
        }
        return answer;
      },
    };
  };

  /** Host A acquires through `slow`; at 1 100 ms host B asks for the user's one slot. */
  const secondHostWhileRunning = async (
    options: { maxPerUser: number; maxGlobal?: number; leaseTtlMs: number; renewEveryMs: number },
    slow: (shared: LimitStore) => LimitStore,
  ) => {
    const keyPrefix = `test:${randomUUID()}:`;
    const shared = createRedisLimitStore({ client: fromIoredis(await connect()), keyPrefix });
    const { warnings, logger } = warningRecorder();
    const hostA = createConcurrencyGuard({ ...options, store: slow(shared), logger });
    const hostB = createConcurrencyGuard({
      ...options,
      store: createRedisLimitStore({ client: fromIoredis(await connect()), keyPrefix }),
    });
    const userId = `user-${randomUUID()}`;
    const context = () => ({ executionId: randomUUID(), userId });
    // Scripts cached first.
    await (await hostB.acquire(context())).release();

    const began = performance.now();
    const running = await hostA.acquire(context());
    // Past the user lease's TTL counted from when Redis granted it.
    await sleep(Math.max(0, began + 1_100 - performance.now()));
    const second = await hostB.acquire(context()).then(
      (lease) => lease,
      (error: unknown) => error,
    );
    const admitted = 'leaseId' in (second as object);
    if (admitted) await (second as { release(): Promise<void> }).release();
    await running.release();
    return { admitted, second, lost: warnings.filter((line) => line.includes('lost its lease')) };
  };

  // The per-user slot is taken first, then the global one; the renewal timer started only once
  // both were held, so the per-user lease's first renewal came `renewEveryMs` after the global
  // slot's answer, not after its own grant: a global answer that took most of `timeoutMs` (well
  // within it) let the per-user lease expire on Redis while the execution ran.
  it('a slow answer for the global slot does not let the per-user lease expire', async () => {
    // Renewed every 400 ms, lives 1 000 ms; the global slot's answer comes 800 ms late.
    const { admitted, second, lost } = await secondHostWhileRunning(
      { maxPerUser: 1, maxGlobal: 100, leaseTtlMs: 1_000, renewEveryMs: 400 },
      (shared) => slowFirstAnswer(shared, '{*}', 800),
    );
    // Host A's execution still ran: host B is refused, and host A never lost its lease.
    expect(admitted).toBe(false);
    expect((await refusal(Promise.reject(second))).code).toBe('RATE_LIMITED');
    expect(lost).toEqual([]);
  });

  // The same with one slot: the renewal timer started when the grant's answer arrived, but Redis
  // wrote the lease (and its expiry) when it ran the acquisition; an answer that took most of
  // `timeoutMs` came back with the lease already near its end.
  it('a slow answer for the only slot does not let its lease expire', async () => {
    const { admitted, second, lost } = await secondHostWhileRunning(
      { maxPerUser: 1, leaseTtlMs: 1_000, renewEveryMs: 400 },
      (shared) => slowFirstAnswer(shared, '}', 800),
    );
    expect(admitted).toBe(false);
    expect((await refusal(Promise.reject(second))).code).toBe('RATE_LIMITED');
    expect(lost).toEqual([]);
  });
});
