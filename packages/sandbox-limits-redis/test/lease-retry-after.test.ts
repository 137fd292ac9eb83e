// A lease set can hold more leases than the cap a caller asks with: insured leases written back
// over the cap when the store returns (concurrency-guard.ts), or hosts configured with different
// caps during a rollout. A refusal's retryAfterMs must then be when enough leases have expired for
// one slot to free, not when the oldest does: a retry at that time was refused again.
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Backend, ioredisBackend, memoryBackend } from './backends.ts';

const backends: [string, () => Promise<Backend>][] = [
  ['memory', async () => memoryBackend()],
  ['redis standalone', () => ioredisBackend()],
  ['redis standalone, clock host', () => ioredisBackend(undefined, 'host')],
];

describe.each(backends)('a lease refusal over a set fuller than the cap (%s)', (_label, make) => {
  let backend: Backend;
  beforeAll(async () => {
    backend = await make();
  });
  afterAll(() => backend.close());

  it('says when a slot frees, and a retry then is admitted', async () => {
    const store = backend.store();
    const key = `conc:{=${randomUUID()}}`;
    const ttlMs = 2_000;
    // Three leases 300 ms apart, taken under a cap of 3; none is renewed.
    for (const holder of ['a', 'b', 'c']) {
      expect((await store.acquireLease(key, holder, 3, ttlMs)).allowed).toBe(true);
      if (holder !== 'c') await sleep(300);
    }
    // Under a cap of 2, one slot frees when two of the three have expired: 'a' then 'b'. The
    // oldest ('a') alone leaves two, still the cap.
    const refused = await store.acquireLease(key, 'x', 2, ttlMs);
    expect(refused).toMatchObject({ allowed: false, held: 3 });
    await sleep(refused.retryAfterMs + 50);
    expect(await store.acquireLease(key, 'x', 2, ttlMs)).toMatchObject({ allowed: true });
  });
});
