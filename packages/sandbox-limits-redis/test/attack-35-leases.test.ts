// Attack review 35 (concurrency leases). Real Redis (the run's standalone server); host A's store
// is wrapped only to add one fault: one answer delayed (Redis runs the command at once, the reply
// comes late), or every call refused at once while "offline" (a fail-fast client reconnecting).
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
import { probeLease, refusal } from './refusal.ts';
import { acquiredWithin } from './reply-dropper.ts';
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
    const { admitted, outcome: second } = await probeLease(hostB, context());
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

  // Failed removals are retried every 100 ms. Each had its own timer, at most 1 000 at once per
  // guard, and a removal that failed past that bound was dropped. Through an outage with a
  // fail-fast client (the settings docs/limits.md recommends), each refused acquisition left a
  // retrying removal (Redis never saw most of them), so after a thousand of them the release of
  // an execution that ended was dropped too, and its lease held the user's slot for its whole TTL
  // after Redis answered again (docs/limits.md: a refused release "is retried likewise").
  it('a release refused during a long outage still frees the slot once Redis answers', async () => {
    const keyPrefix = `test:${randomUUID()}:`;
    const shared = createRedisLimitStore({ client: fromIoredis(await connect()), keyPrefix });
    // A client without an offline queue: while the connection is down, every call is refused at
    // once (nothing reaches Redis).
    let offline = false;
    const refused = () => Promise.reject(new Error('the client is offline'));
    const failFast: LimitStore = {
      ...shared,
      kind: 'redis',
      acquireLease: (...args) => (offline ? refused() : shared.acquireLease(...args)),
      releaseLease: (...args) => (offline ? refused() : shared.releaseLease(...args)),
    };
    const hostA = createConcurrencyGuard({
      store: failFast,
      maxPerUser: 1,
      logger: warningRecorder().logger,
    });
    const hostB = createConcurrencyGuard({
      store: createRedisLimitStore({ client: fromIoredis(await connect()), keyPrefix }),
      maxPerUser: 1,
    });
    const userId = `user-${randomUUID()}`;
    const running = await hostA.acquire({ executionId: randomUUID(), userId });
    offline = true;
    // A busy host through the outage: a thousand acquisitions refused with UNAVAILABLE.
    const others = await Promise.all(
      Array.from({ length: 1_000 }, () =>
        refusal(hostA.acquire({ executionId: randomUUID(), userId: `other-${randomUUID()}` })),
      ),
    );
    expect(new Set(others.map((error) => error.code))).toEqual(new Set(['UNAVAILABLE']));
    // The user's execution ends during the outage; then the client is back.
    await running.release();
    offline = false;
    // Nothing runs for the user: host B gets the slot within a second (the failed removals are
    // sent again every 100 ms), not 15 s later when the lease expires.
    const lease = await acquiredWithin(hostB, () => ({ executionId: randomUUID(), userId }), 1_000);
    await lease?.release();
    expect(lease).toBeDefined();
  });
});
