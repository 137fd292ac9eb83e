// Review: the refund log marks a unit's store part when its check is *sent*, assuming a refund
// logged before that lands on the store before the check. A refund whose EVALSHA finds its script
// missing (after a restart, a failover or SCRIPT FLUSH, while the rate script is already loaded
// again) is re-sent as EVAL after the NOSCRIPT reply: checks sent after it was logged land first,
// and it moves their slots too. Their later refunds then gave back intervals that had already
// refilled: another host ran 15 where burst + t × rate allows 10.
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRateLimitGuard, type RateLimitLease } from '../src/index.ts';
import { type Backend, ioredisBackend } from './backends.ts';
import { burstAfterRefunds } from './burst-after-refunds.ts';

describe('a refund re-sent after NOSCRIPT', () => {
  let backend: Backend;
  beforeAll(async () => {
    backend = await ioredisBackend();
  });
  afterAll(() => backend.close());

  it('counts as possibly landing after checks sent after it', async () => {
    // 10 per second (one unit per 100 ms), burst 10.
    const rule = { limit: 10, windowMs: 1_000, refusalCache: 0, timeoutMs: 1_000 } as const;
    const hostA = createRateLimitGuard({ store: backend.store(), ...rule });
    const hostB = createRateLimitGuard({ store: backend.store(), ...rule });
    const userId = `user-${randomUUID()}`;
    const context = () => ({ executionId: randomUUID(), userId });
    // The script cache is lost; a check of another user loads the rate script again, the
    // refund script is still missing.
    await backend.flushScripts();
    await hostA.acquire({ executionId: randomUUID(), userId: `other-${randomUUID()}` });
    const started = performance.now();
    const first: RateLimitLease[] = [];
    for (let i = 0; i < 5; i++) first.push(await hostA.acquire(context()));
    // In one tick: the first five refunded, then five more checks sent. The refunds' EVALSHA
    // answers NOSCRIPT and their EVAL lands after the five checks.
    const refunded = first.map((lease) => lease.refund());
    const pending = Array.from({ length: 5 }, () => hostA.acquire(context()));
    const held = await Promise.all(pending);
    await Promise.all(refunded);
    // The refunds moved the five held units back to the first five's slots (100–500 ms): 560 ms
    // in, they have passed and the bucket is full.
    await sleep(Math.max(0, started + 560 - performance.now()));
    const { ran, tookMs } = await burstAfterRefunds(hostB, context, held);
    // burst + t × limit / windowMs over the few milliseconds this took.
    expect(ran).toBeLessThanOrEqual(10 + Math.ceil(tookMs / 100));
  });
});
