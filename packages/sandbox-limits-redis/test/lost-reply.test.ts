// A lease acquisition that Redis ran but whose reply never came back: the connection dropped
// between the two (a proxy here cuts it as the reply arrives). node-redis rejects the command, the
// guard refuses with UNAVAILABLE, and nobody holds the lease: it must not keep the user's slot
// taken for a lease TTL on every host.
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
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

describe('a lease whose reply was lost', () => {
  const url = new URL(inject('redisUrl'));
  const target = { host: url.hostname, port: Number(url.port || 6379) };
  let proxy: Awaited<ReturnType<typeof replyDropper>>;
  let viaProxy: ReturnType<typeof createClient>;
  let direct: Redis;
  beforeAll(async () => {
    proxy = await replyDropper(target);
    viaProxy = createClient({ url: `redis://127.0.0.1:${proxy.port}` });
    viaProxy.on('error', () => {});
    await viaProxy.connect();
    direct = new Redis(target);
    await once(direct, 'ready');
  });
  afterAll(async () => {
    await viaProxy?.close().catch(() => {});
    await direct?.quit().catch(() => {});
    await proxy?.close();
  });

  it('does not keep the slot of an acquisition refused with UNAVAILABLE', async () => {
    const keyPrefix = `test:${randomUUID()}:`;
    const hostA = createConcurrencyGuard({
      store: createRedisLimitStore({ client: fromNodeRedis(viaProxy), keyPrefix }),
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
    // Scripts cached first, so that the dropped reply is the acquisition's own.
    await (await hostA.acquire(context())).release();
    proxy.arm();
    expect((await refusal(hostA.acquire(context()))).code).toBe('UNAVAILABLE');
    // Nothing runs for this user: host B gets the one slot within a second (the client
    // reconnects first), not once the phantom lease's 15 s have passed.
    const lease = await acquiredWithin(hostB, context, 1_000);
    expect(lease).toBeDefined();
    await lease?.release();
  });

  it('does not keep the slot of an insured lease whose write-back reply was lost', async () => {
    const keyPrefix = `test:${randomUUID()}:`;
    // Renewed (written back) every 500 ms; a lease left behind would hold its slot for 3 s.
    const hostA = createConcurrencyGuard({
      store: createRedisLimitStore({ client: fromNodeRedis(viaProxy), keyPrefix }),
      maxPerUser: 1,
      failMode: 'insurance',
      leaseTtlMs: 3_000,
      renewEveryMs: 500,
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
    await (await hostA.acquire(context())).release();
    // The acquisition's reply is lost: the insurance store grants the lease.
    proxy.arm();
    const running = await hostA.acquire(context());
    expect(running.insured).toBe(true);
    // Reconnected; then the first write-back (at 500 ms) runs on Redis and its reply is lost.
    await sleep(200);
    proxy.arm();
    await sleep(500);
    // The execution ends before the next write-back.
    await running.release();
    const lease = await acquiredWithin(hostB, context, 1_000);
    expect(lease).toBeDefined();
    await lease?.release();
  });
});
