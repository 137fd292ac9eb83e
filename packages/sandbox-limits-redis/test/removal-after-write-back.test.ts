// Review: the removal that follows a failed lease acquisition (removedOnFailure) can land after a
// write-back of the same lease that was already in flight. With failMode insurance the insurance
// store grants the lease the acquisition was for (same holder id) and its first renewal writes it
// back; if the acquisition then fails on the client (here ioredis's commandTimeout, while Redis is
// stalled), its removal is queued behind that write-back and deletes the running lease from Redis.
// The write-back's answer makes the guard count the lease as a shared one, so nothing writes it
// back: another host takes the user's only slot while the execution runs.
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createConcurrencyGuard, createRedisLimitStore, fromIoredis } from '../src/index.ts';
import { type RedisProcess, startRedis } from './redis-servers.ts';
import { probeLease, refusal } from './refusal.ts';
import { warningRecorder } from './warning-recorder.ts';

describe('an acquisition that fails after its lease was written back', () => {
  let server: RedisProcess;
  const clients: Redis[] = [];
  const connect = async (options: { commandTimeout?: number } = {}) => {
    const client = new Redis({
      host: '127.0.0.1',
      port: server.port,
      maxRetriesPerRequest: 1,
      ...options,
    });
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

  it('does not remove the running lease from Redis', async () => {
    const admin = await connect();
    const keyPrefix = `test:${randomUUID()}:`;
    const store = (client: Redis) =>
      createRedisLimitStore({ client: fromIoredis(client), keyPrefix });
    // Host A's guard gives up after 500 ms and renews every 1 600 ms (timed from when it sent the
    // acquisition); its client gives up on a command after 1 700 ms. Redis is paused for
    // 2 000 ms: the guard gives the acquisition (sent at 0) up at ~550 ms and the insurance store
    // grants the lease; its first renewal, a write-back, is sent at ~1 600 ms; the client fails
    // the acquisition at ~1 700 ms and its removal is sent behind the write-back. At 2 000 ms
    // Redis runs the three in that order, and the write-back's answer arrives within the guard's
    // timeout.
    const hostA = createConcurrencyGuard({
      store: store(await connect({ commandTimeout: 1_700 })),
      maxPerUser: 1,
      failMode: 'insurance',
      timeoutMs: 500,
      leaseTtlMs: 3_000,
      renewEveryMs: 1_600,
      logger: warningRecorder().logger,
    });
    const hostB = createConcurrencyGuard({
      store: store(await connect()),
      maxPerUser: 1,
      timeoutMs: 10_000,
    });
    const userId = `user-${randomUUID()}`;
    const context = () => ({ executionId: randomUUID(), userId });
    await (await hostA.acquire(context())).release();

    const began = performance.now();
    await admin.call('CLIENT', 'PAUSE', '2000', 'ALL');
    const running = await hostA.acquire(context());
    expect(running.insured).toBe(true);
    // Redis is back and has run all three; host A's next renewal (at ~3 200 ms) has not come.
    await sleep(Math.max(0, began + 2_150 - performance.now()));
    // Host A still runs the user's one execution: host B must be refused.
    const { admitted, outcome: second } = await probeLease(hostB, context());
    await running.release();
    expect(admitted).toBe(false);
    expect((await refusal(Promise.reject(second))).code).toBe('RATE_LIMITED');
  });
});
