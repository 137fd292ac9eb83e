import { describe, expect, it } from 'vitest';
import { RefusalCache } from './refusal-cache.ts';

describe('RefusalCache', () => {
  it('holds a refusal until exactly its retry time, then forgets it', () => {
    const cache = new RefusalCache(10);
    cache.refuse('k', 1_000, 500, 2_000);
    expect(cache.lookup('k', 1_000)).toEqual({ until: 1_500, resetAt: 3_000 });
    expect(cache.lookup('k', 1_499.9)).toEqual({ until: 1_500, resetAt: 3_000 });
    expect(cache.lookup('k', 1_500)).toBeUndefined();
    expect(cache.size).toBe(0);
    expect(cache.lookup('other', 0)).toBeUndefined();
  });

  it('drops the least recently refused key when full, and forgets on request', () => {
    const cache = new RefusalCache(2);
    cache.refuse('a', 0, 100, 100);
    cache.refuse('b', 0, 100, 100);
    cache.refuse('a', 1, 100, 100); // refused again: now the most recent
    cache.refuse('c', 2, 100, 100);
    expect(cache.size).toBe(2);
    expect(cache.lookup('b', 3)).toBeUndefined();
    expect(cache.lookup('a', 3)?.until).toBe(101);
    cache.forget('a');
    expect(cache.lookup('a', 3)).toBeUndefined();
    expect(cache.lookup('c', 3)?.until).toBe(102);
  });
});
