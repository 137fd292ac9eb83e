// Review: the removal that follows a failed lease acquisition (removedOnFailure) is sent the
// moment the failure arrives. When the failure is a dropped connection, the client is offline
// then; with the fail-fast settings docs/limits.md recommends (no offline queue) the removal
// itself fails at once and is dropped, and the phantom lease Redis ran keeps the user's slot for
// its whole TTL on every host.
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { Redis } from 'ioredis';
import { createClient } from 'redis';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import {
  createConcurrencyGuard,
  createRedisLimitStore,
  fromIoredis,
  fromNodeRedis,
} from '../src/index.ts';
import { refusal } from './refusal.ts';
import { acquiredWithin, replyDropper } from './reply-dropper.ts';
import { warningRecorder } from './warning-recorder.ts';

describe('a lost acquisition reply, with the documented fail-fast client settings', () => {
  const url = new URL(inject('redisUrl'));
  const target = { host: url.hostname, port: Number(url.port || 6379) };
  let proxy: Awaited<ReturnType<typeof replyDropper>>;
  let direct: Redis;
  const closers: (() => Promise<unknown>)[] = [];
  beforeAll(async () => {
    proxy = await replyDropper(target);
    direct = new Redis(target);
    await once(direct, 'ready');
  });
  afterAll(async () => {
    for (const close of closers) await close().catch(() => {});
    await direct?.quit().catch(() => {});
    await proxy?.close();
  });

  const phantomFreed = async (client: ReturnType<typeof fromNodeRedis>) => {
    const keyPrefix = `test:${randomUUID()}:`;
    const hostA = createConcurrencyGuard({
      store: createRedisLimitStore({ client, keyPrefix }),
      maxPerUser: 1,
      timeoutMs: 10_000,
    });
    const hostB = createConcurrencyGuard({
      store: createRedisLimitStore({ client: fromIoredis(direct), keyPrefix }),
      maxPerUser: 1,
      timeoutMs: 10_000,
    });
    const userId = `user-${randomUUID()}`;
    const context = () => ({ executionId: randomUUID(), userId });
    await (await hostA.acquire(context())).release();
    proxy.arm();
    expect((await refusal(hostA.acquire(context()))).code).toBe('UNAVAILABLE');
    // Redis ran the acquisition; nothing runs for the user. The lease TTL is 15 s: host B must
    // get the slot long before (the client reconnects within a few hundred ms).
    const lease = await acquiredWithin(hostB, context, 2_000);
    const key = `${keyPrefix}concurrency:conc:{=${userId}}`;
    const left = await direct.zcard(key);
    await lease?.release();
    return { lease, left };
  };

  it('node-redis, disableOfflineQueue: the phantom lease is removed', async () => {
    const client = createClient({
      url: `redis://127.0.0.1:${proxy.port}`,
      disableOfflineQueue: true,
      socket: { connectTimeout: 1_000 },
    });
    client.on('error', () => {});
    await client.connect();
    closers.push(() => client.close());
    const { lease } = await phantomFreed(fromNodeRedis(client));
    expect(lease).toBeDefined();
  });

  it('node-redis, disableOfflineQueue: a release sent while the client reconnects', async () => {
    const client = createClient({
      url: `redis://127.0.0.1:${proxy.port}`,
      disableOfflineQueue: true,
      socket: { connectTimeout: 1_000 },
    });
    client.on('error', () => {});
    await client.connect();
    closers.push(() => client.close());
    const keyPrefix = `test:${randomUUID()}:`;
    const hostA = createConcurrencyGuard({
      store: createRedisLimitStore({ client: fromNodeRedis(client), keyPrefix }),
      maxPerUser: 1,
      timeoutMs: 10_000,
      logger: warningRecorder().logger,
    });
    const hostB = createConcurrencyGuard({
      store: createRedisLimitStore({ client: fromIoredis(direct), keyPrefix }),
      maxPerUser: 1,
      timeoutMs: 10_000,
    });
    const userId = `user-${randomUUID()}`;
    const context = () => ({ executionId: randomUUID(), userId });
    const running = await hostA.acquire(context());
    // The connection drops as the execution ends: the release is refused by the offline client.
    proxy.cut();
    await running.release();
    // Nothing runs for the user: host B gets the slot once host A's client is back (well within
    // 2 s), not when the lease's 15 s TTL runs out.
    const lease = await acquiredWithin(hostB, context, 2_000);
    expect(lease).toBeDefined();
    await lease?.release();
  });
});
