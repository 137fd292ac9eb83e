// A lease acquisition that Redis answers after the guard gave up, on failMode insurance: the
// insurance store granted the same lease (same holder id) meanwhile, and its first renewal wrote
// it back to Redis. The late answer's undo then removed it from Redis while the execution still
// ran and the guard counted it as a Redis lease: another host took its slot, two ran under a cap
// of 1. Redis is stalled with CLIENT PAUSE on a server of this file's own.
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createConcurrencyGuard, createRedisLimitStore, fromIoredis } from '../src/index.ts';
import { type RedisProcess, startRedis } from './redis-servers.ts';
import { refusal } from './refusal.ts';
import { warningRecorder } from './warning-recorder.ts';

describe('a lease answered late while the insurance store held it', () => {
  let server: RedisProcess;
  const clients: Redis[] = [];
  const connect = async () => {
    const client = new Redis({ host: '127.0.0.1', port: server.port, maxRetriesPerRequest: 1 });
    clients.push(client);
    await once(client, 'ready');
    return client;
  };
  beforeAll(async () => {
    server = await startRedis();
  });
  afterAll(async () => {
    await Promise.all(clients.map((client) => client.quit().catch(() => {})));
    await server?.stop();
  });

  it('keeps it counted on Redis while it runs', async () => {
    const admin = await connect();
    const keyPrefix = `test:${randomUUID()}:`;
    const store = (client: Redis) =>
      createRedisLimitStore({ client: fromIoredis(client), keyPrefix });
    // Host A gives up after 500 ms and renews every 1 450 ms, timed from when it sent the
    // acquisition: its first renewal (a write-back) is sent about 1 450 ms in, while Redis is
    // still paused (1 750 ms), and answered in time.
    const hostA = createConcurrencyGuard({
      store: store(await connect()),
      maxPerUser: 1,
      failMode: 'insurance',
      timeoutMs: 500,
      leaseTtlMs: 3_000,
      renewEveryMs: 1_450,
      logger: warningRecorder().logger,
    });
    const hostB = createConcurrencyGuard({
      store: store(await connect()),
      maxPerUser: 1,
      timeoutMs: 10_000,
    });
    const userId = `user-${randomUUID()}`;
    const context = () => ({ executionId: randomUUID(), userId });
    // Scripts cached first, so that no NOSCRIPT round trip reorders the calls below.
    await (await hostA.acquire(context())).release();

    await admin.call('CLIENT', 'PAUSE', '1750', 'ALL');
    const running = await hostA.acquire(context());
    expect(running.insured).toBe(true);
    // Redis is back (1 750 ms), the late answer and the write-back have landed; the next renewal
    // (about 2 900 ms) has not come yet.
    await sleep(1_450);
    const holders = await admin.zrange(`${keyPrefix}concurrency:conc:{=${userId}}`, '0', '-1');
    expect(holders).toEqual([running.leaseId]);
    // The lease still runs on host A: host B is refused the user's one slot.
    expect((await refusal(hostB.acquire(context()))).code).toBe('RATE_LIMITED');
    await running.release();
  });
});
