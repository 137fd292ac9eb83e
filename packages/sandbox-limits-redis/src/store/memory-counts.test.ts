import { describe, expect, it } from 'vitest';
import { createMemoryCounts } from './memory-counts.ts';

describe('memory counts', () => {
  const rule = { limit: 10, windowMs: 60_000, burst: 10 };
  const start = Date.UTC(2026, 11, 1);

  it('keeps a rate entry a window after its last unit, like the Redis key', () => {
    let now = start;
    const counts = createMemoryCounts(() => ({ now, fellBack: false }));
    counts.rateLimit('k', rule);
    now += 6_001; // one interval (6 s) later the bucket is full again
    expect(counts.entries()).toEqual([{ key: 'k', pttl: 60_000 - 6_001 }]);
  });

  it('drops a ledger rate entry once the bucket is full again, which means the same', () => {
    let now = start;
    const ledger = createMemoryCounts(() => ({ now, fellBack: false }), true);
    ledger.rateLimit('k', rule);
    ledger.rateLimit('k', rule);
    now += 11_999;
    expect(ledger.entries()).toEqual([{ key: 'k', pttl: 1 }]);
    now += 1;
    expect(ledger.entries()).toEqual([]);
    // And the bucket behind it is full: ten admitted at once.
    for (let i = 0; i < 10; i++) expect(ledger.rateLimit('k', rule).allowed).toBe(true);
    expect(ledger.rateLimit('k', rule).allowed).toBe(false);
  });

  it('admits a check up to toleranceMs early, and no earlier', () => {
    let now = start;
    const ledger = createMemoryCounts(() => ({ now, fellBack: false }), true);
    for (let i = 0; i < 10; i++) ledger.rateLimit('k', rule);
    // The next unit is due 6 000 ms from now.
    now += 4_999;
    expect(ledger.rateLimit('k', rule, 1_000).allowed).toBe(false);
    now += 1;
    expect(ledger.rateLimit('k', rule, 1_000).allowed).toBe(true);
  });
});
