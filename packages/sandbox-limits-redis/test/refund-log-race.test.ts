// Units admitted while earlier units of the same user were being refunded on this host: the store
// counted them before the refunds landed, so their resetMs claims slots the refunds then moved
// earlier. The refund log subtracted only refunds logged after a unit's answer *arrived*, which
// these refunds precede (they were logged while the answers travelled). Refunded once the bucket
// had refilled, such units still gave back most of an interval each, to a store whose bucket was
// full: another host then ran 14 in a moment where burst + t × rate allows 10.
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRateLimitGuard, type RateLimitLease } from '../src/index.ts';
import { type Backend, ioredisBackend, memoryBackend } from './backends.ts';
import { burstAfterRefunds } from './burst-after-refunds.ts';

const backends: [string, () => Promise<Backend>][] = [
  ['memory', async () => memoryBackend()],
  ['redis standalone', () => ioredisBackend()],
];

describe.each(backends)('refunds racing admissions (%s)', (_label, make) => {
  let backend: Backend;
  beforeAll(async () => {
    backend = await make();
  });
  afterAll(() => backend.close());

  it('give back nothing of units whose time has passed', async () => {
    // 10 per second (one unit per 100 ms), burst 10.
    const rule = { limit: 10, windowMs: 1_000, refusalCache: 0, timeoutMs: 1_000 } as const;
    const hostA = createRateLimitGuard({ store: backend.store(), ...rule });
    const hostB = createRateLimitGuard({ store: backend.store(), ...rule });
    const userId = `user-${randomUUID()}`;
    const context = () => ({ executionId: randomUUID(), userId });
    const started = performance.now();
    const first: RateLimitLease[] = [];
    for (let i = 0; i < 5; i++) first.push(await hostA.acquire(context()));
    // Five more sent, then the first five refunded, in one tick: the store admits the five before
    // it sees the refunds (they are sent after), and their answers arrive after the refunds.
    const pending = Array.from({ length: 5 }, () => hostA.acquire(context()));
    const refunded = first.map((lease) => lease.refund());
    const held = await Promise.all(pending);
    await Promise.all(refunded);
    // 560 ms later the five held units (500 ms of the bucket) have passed: the bucket is full.
    await sleep(Math.max(0, started + 560 - performance.now()));
    const { ran, tookMs } = await burstAfterRefunds(hostB, context, held);
    // burst + t × limit / windowMs over the few milliseconds this took.
    expect(ran).toBeLessThanOrEqual(10 + Math.ceil(tookMs / 100));
  });
});
