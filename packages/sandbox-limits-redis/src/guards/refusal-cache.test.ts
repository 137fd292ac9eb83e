import { describe, expect, it } from 'vitest';
import { RefusalCache } from './refusal-cache.ts';

function clocked(size: number) {
  const clock = { now: 0 };
  return { clock, cache: new RefusalCache(size, () => clock.now) };
}

describe('RefusalCache', () => {
  it('holds a refusal until exactly its retry time, then forgets it', () => {
    const { clock, cache } = clocked(10);
    clock.now = 1_000;
    cache.refuse('k', 500, 2_000);
    expect(cache.lookup('k')).toEqual({ retryAfterMs: 500, resetMs: 2_000 });
    clock.now = 1_499.5;
    expect(cache.lookup('k')).toEqual({ retryAfterMs: 1, resetMs: 1_501 });
    clock.now = 1_500;
    expect(cache.lookup('k')).toBeUndefined();
    expect(cache.size).toBe(0);
    expect(cache.lookup('other')).toBeUndefined();
  });

  it('drops the least recently refused key when full, and forgets on request', () => {
    const { clock, cache } = clocked(2);
    cache.refuse('a', 100, 100);
    cache.refuse('b', 100, 100);
    clock.now = 1;
    cache.refuse('a', 100, 100); // refused again: now the most recent
    clock.now = 2;
    cache.refuse('c', 100, 100);
    expect(cache.size).toBe(2);
    clock.now = 3;
    expect(cache.lookup('b')).toBeUndefined();
    expect(cache.lookup('a')?.retryAfterMs).toBe(98);
    cache.forget('a');
    expect(cache.lookup('a')).toBeUndefined();
    expect(cache.lookup('c')?.retryAfterMs).toBe(99);
  });

  it('does not record a refusal of a check sent before a key was forgotten', () => {
    const { cache } = clocked(10);
    const sentAt = cache.epoch;
    cache.forget('a'); // a refund while the check was in flight
    cache.refuse('a', 100, 100, sentAt);
    expect(cache.lookup('a')).toBeUndefined();
    cache.refuse('a', 100, 100, cache.epoch);
    expect(cache.lookup('a')?.retryAfterMs).toBe(100);
  });
});
