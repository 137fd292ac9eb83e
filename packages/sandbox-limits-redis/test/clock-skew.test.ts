// Two hosts whose clocks disagree by 30 s share one Redis: what docs/limits.md ("Clock skew with
// clock: 'host'") says they do to a rate limit, measured, and that the default clock is immune.
// The skew is one host's clock moved forward: its store is made with a clock that reads 30 s
// ahead. Replacing `Date.now` cannot do it: the store reads the one captured when it loaded.
import { randomUUID } from 'node:crypto';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { hostWallNow } from '../src/clock/host-clock.ts';
import type { Clock, LimitStore } from '../src/index.ts';
import { type Backend, ioredisBackend } from './backends.ts';

const skewMs = 30_000;
// 10 per minute: one unit every 6 s; the 30 s skew is worth 5 units.
const rule = { limit: 10, windowMs: 60_000, burst: 10 };

const backends: Backend[] = [];
afterAll(() => Promise.all(backends.map((backend) => backend.close())));

async function twoHosts(clock: Clock) {
  const backend = await ioredisBackend(undefined, clock);
  backends.push(backend);
  const behind = backend.store();
  const ahead = backend.store(() => hostWallNow() + skewMs);
  return { behind, checkAhead: (key: string) => ahead.rateLimit(key, rule) };
}

async function admitted(check: () => ReturnType<LimitStore['rateLimit']>, tries: number) {
  let count = 0;
  for (let i = 0; i < tries; i++) if ((await check()).allowed) count++;
  return count;
}

describe('clock skew between hosts', () => {
  it("clock 'host': a host 30 s ahead sees 5 units refilled; the one behind then waits 30 s longer", async () => {
    const { behind, checkAhead } = await twoHosts('host');
    const key = `rate:{=${randomUUID()}}`;
    expect(await admitted(() => behind.rateLimit(key, rule), 12)).toBe(10);
    // d × limit / windowMs = 30 s × 10 / 60 s = 5 more units, never more than burst.
    expect(await admitted(() => checkAhead(key), 12)).toBe(5);
    // The stored TAT is now in the ahead host's time: the host behind waits the skew plus one
    // interval (6 s) instead of one interval.
    const refused = await behind.rateLimit(key, rule);
    expect(refused.allowed).toBe(false);
    expect(refused.retryAfterMs).toBeGreaterThan(skewMs + 6_000 - 2_000);
    expect(refused.retryAfterMs).toBeLessThanOrEqual(skewMs + 6_000);
  });

  it("clock 'host': a refusal never outlasts the key, however far ahead the writer's clock ran", async () => {
    // Found by an attack review: a host 9 years ahead (within the ±10-year plausibility check)
    // admitted a user once; the host behind was told to retry in 9 years and cached that,
    // though the key expired after windowMs and the store then admitted.
    const backend = await ioredisBackend(undefined, 'host');
    backends.push(backend);
    const behind = backend.store();
    const farAhead = backend.store(() => hostWallNow() + 9 * 365 * 86_400_000);
    const short = { limit: 3, windowMs: 1_000, burst: 1 };
    const key = `rate:{=${randomUUID()}}`;
    expect((await farAhead.rateLimit(key, short)).allowed).toBe(true);
    const refused = await behind.rateLimit(key, short);
    expect({ allowed: refused.allowed, withinKeyLife: refused.retryAfterMs <= 1_000 }).toEqual({
      allowed: false,
      withinKeyLife: true,
    });
    expect(refused.resetMs).toBeLessThanOrEqual(1_000);
  });

  it("clock 'redis' (the default): the same skew changes nothing", async () => {
    const { behind, checkAhead } = await twoHosts('redis');
    const key = `rate:{=${randomUUID()}}`;
    expect(await admitted(() => behind.rateLimit(key, rule), 12)).toBe(10);
    expect(await admitted(() => checkAhead(key), 12)).toBe(0);
    const refused = await behind.rateLimit(key, rule);
    expect(refused.allowed).toBe(false);
    expect(refused.retryAfterMs).toBeGreaterThan(6_000 - 2_000);
    expect(refused.retryAfterMs).toBeLessThanOrEqual(6_000);
  });

  it("clock 'host' reads a clock code in the process cannot replace: Date.now 30 s ahead changes nothing", async () => {
    const backend = await ioredisBackend(undefined, 'host');
    backends.push(backend);
    const [behind, other] = [backend.store(), backend.store()];
    const key = `rate:{=${randomUUID()}}`;
    expect(await admitted(() => behind.rateLimit(key, rule), 12)).toBe(10);
    const realNow = Date.now.bind(Date);
    const spy = vi.spyOn(Date, 'now').mockImplementation(() => realNow() + skewMs);
    try {
      // Were the replaced Date.now read, this would admit 5 (the first case above).
      expect(await admitted(() => other.rateLimit(key, rule), 12)).toBe(0);
    } finally {
      spy.mockRestore();
    }
  });
});
