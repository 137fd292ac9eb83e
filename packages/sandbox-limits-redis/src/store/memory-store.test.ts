import { describe, expect, it, vi } from 'vitest';
import { createMemoryLimitStore } from './memory-store.ts';

describe('memory store', () => {
  it('drops expired entries of every kind, so nothing accumulates', async () => {
    let now = Date.UTC(2026, 11, 1);
    const store = createMemoryLimitStore({ now: () => now });
    for (let i = 0; i < 1_000; i++) {
      await store.rateLimit(`r${i}`, { limit: 10, windowMs: 1_000, burst: 10 });
      await store.claimBudget(`b${i}`, 'e', 1, 1_000);
      await store.acquireLease(`l${i}`, 'h', 1, 1_000);
    }
    now += 2_000;
    // The sweep runs on the next call; a fresh key then finds an empty store behind it.
    expect(await store.acquireLease('l0', 'other', 1, 1_000)).toEqual({
      allowed: true,
      held: 1,
      retryAfterMs: 0,
    });
    expect(await store.claimBudget('b1', 'x', 1, 1_000)).toMatchObject({ used: 1 });
    expect((await store.rateLimit('r1', { limit: 10, windowMs: 1_000, burst: 10 })).remaining).toBe(
      9,
    );
  });

  it('follows the GCRA arithmetic exactly on a fake clock', async () => {
    const start = Date.UTC(2026, 11, 1);
    let now = start;
    const store = createMemoryLimitStore({ now: () => now });
    const rule = { limit: 2, windowMs: 1_000, burst: 2 };
    expect(await store.rateLimit('k', rule)).toEqual({
      allowed: true,
      remaining: 1,
      resetMs: 500,
      retryAfterMs: 0,
    });
    expect((await store.rateLimit('k', rule)).remaining).toBe(0);
    expect(await store.rateLimit('k', rule)).toEqual({
      allowed: false,
      remaining: 0,
      resetMs: 1_000,
      retryAfterMs: 500,
    });
    now = start + 499;
    expect((await store.rateLimit('k', rule)).allowed).toBe(false);
    now = start + 500;
    expect(await store.rateLimit('k', rule)).toMatchObject({ allowed: true, remaining: 0 });
  });

  it('times by the monotonic clock captured at load: replacing performance.now changes nothing', async () => {
    const store = createMemoryLimitStore();
    const rule = { limit: 2, windowMs: 60_000, burst: 2 };
    await store.rateLimit('k', rule);
    await store.rateLimit('k', rule);
    const real = performance.now.bind(performance);
    const spy = vi.spyOn(performance, 'now').mockImplementation(() => real() + 86_400_000);
    try {
      // Had the replaced clock been read, the bucket would be full again a day later.
      expect((await store.rateLimit('k', rule)).allowed).toBe(false);
    } finally {
      spy.mockRestore();
    }
  });
});
