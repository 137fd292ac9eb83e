// A refund on this host while a check of the same user is in flight: the store answers the check
// (refused, the unit still held) before it sees the refund, and the answer arrives after the
// refund made the user admissible again. Cached, that stale refusal refused the user locally for a
// whole retryAfterMs, though the store held no unit of them any more.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRateLimitGuard } from '../src/index.ts';
import { type Backend, ioredisBackend, memoryBackend } from './backends.ts';
import { refusal } from './refusal.ts';

const backends: [string, () => Promise<Backend>][] = [
  ['memory', async () => memoryBackend()],
  ['redis standalone', () => ioredisBackend()],
];

describe.each(backends)('a refund racing a check (%s)', (_label, make) => {
  let backend: Backend;
  beforeAll(async () => {
    backend = await make();
  });
  afterAll(() => backend.close());

  it('does not cache a refusal the store gave before this host refunded the unit', async () => {
    const guard = createRateLimitGuard({
      store: backend.store(),
      limit: 1,
      windowMs: 60_000,
      timeoutMs: 10_000,
    });
    const userId = `user-${randomUUID()}`;
    const context = () => ({ executionId: randomUUID(), userId });
    const held = await guard.acquire(context());
    // Sent first: the store still holds the unit and refuses (about 60 s).
    const inFlight = guard.acquire(context());
    // Sent second, same tick: the one unit goes back, the bucket is full again.
    const refunded = held.refund();
    const refused = await refusal(inFlight);
    expect(refused.code).toBe('RATE_LIMITED');
    await refunded;
    // Nobody holds a unit of this user: the store admits the next check.
    const next = await guard.acquire(context());
    expect(next.decision?.allowed).toBe(true);
  });
});
