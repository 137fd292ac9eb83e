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

  // The per-user slot is taken first, then the global one; the renewal timer started only once
  // both were held, so the per-user lease's first renewal came `renewEveryMs` after the global
  // slot's answer, not after its own grant: a global answer that took most of `timeoutMs` (well
  // within it) let the per-user lease expire on Redis while the execution ran.
  it('a slow answer for the global slot does not let the per-user lease expire', async () => {
    const keyPrefix = `test:${randomUUID()}:`;
    const shared = createRedisLimitStore({ client: fromIoredis(await connect()), keyPrefix });
    let delayGlobal = 800;
    // Host A's link to the node of the global key is slow once: the answer comes 800 ms late.
    const slowGlobal: LimitStore = {
      ...shared,
      kind: 'redis',
      acquireLease: async (key, member, limit, ttlMs) => {
        const answer = await shared.acquireLease(key, member, limit, ttlMs);
        if (key.endsWith('{*}') && delayGlobal > 0) {
          const wait = delayGlobal;
          delayGlobal = 0;
          await sleep(wait);
        }
        return answer;
      },
    };
    const { warnings, logger } = warningRecorder();
    // Renewed every 400 ms, lives 1 000 ms: 600 ms of margin for a renewal's round trip.
    const options = { maxPerUser: 1, maxGlobal: 100, leaseTtlMs: 1_000, renewEveryMs: 400 };
    const hostA = createConcurrencyGuard({ ...options, store: slowGlobal, logger });
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
    // Past the per-user lease's TTL counted from its grant, before the next 400 ms of renewals.
    await sleep(Math.max(0, began + 1_100 - performance.now()));
    const second = await hostB.acquire(context()).then(
      (lease) => lease,
      (error: unknown) => error,
    );
    const admitted = 'leaseId' in (second as object);
    if (admitted) await (second as { release(): Promise<void> }).release();
    await running.release();
    // Host A's execution still ran: host B is refused, and host A never lost its lease.
    expect(admitted).toBe(false);
    expect((await refusal(Promise.reject(second))).code).toBe('RATE_LIMITED');
    expect(warnings.filter((message) => message.includes('lost its lease'))).toEqual([]);
  });
});
