// The rate ledger's slack is meant to cover every answer the guard still accepts. A call gives up
// only at a tick of the deadline watcher, up to a tenth of timeoutMs after timeoutMs, so an answer
// can arrive later than timeoutMs and still count: the ledger, timing that unit on arrival, then
// refused (thisHost) a later unit the store had admitted on time.
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { lateFirstAnswer } from '../../test/faulty-stores.ts';
import { createRateLimitGuard } from './rate-limit-guard.ts';

describe('the rate ledger’s slack', () => {
  it('covers an answer accepted after timeoutMs but before the call gave up', async () => {
    // 1 per 4 s. The first answer takes 2 100 ms: past timeoutMs (2 000), before the watcher
    // gives up (its ticks are 200 ms apart, so at 2 200 ms). The store admits the second check
    // 4 s after the first; the ledger, counting the first at 2 100 ms, admitted it only from
    // 4 100 ms less its 2 000 ms of slack, after the 4 030 ms at which it came.
    const slow = lateFirstAnswer('rateLimit', 2_100);
    const rate = createRateLimitGuard({
      store: slow,
      limit: 1,
      windowMs: 4_000,
      timeoutMs: 2_000,
      refusalCache: 0,
    });
    const context = () => ({ executionId: randomUUID(), userId: 'u' });
    const sent = performance.now();
    expect((await rate.acquire(context())).decision?.allowed).toBe(true);
    await sleep(Math.max(0, sent + 4_030 - performance.now()));
    expect((await rate.acquire(context())).decision?.allowed).toBe(true);
  }, 15_000);
});
