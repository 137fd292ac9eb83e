// The bound check of the refund races (refund-log-race, refund-noscript-race): once host A's
// refunds and held units have passed, another host may run at most burst + t × rate. Written
// once: the checks host B gets in a row, then again after A refunds the units it still holds.
import type { RateLimitGuard, RateLimitLease } from '../src/index.ts';

/** Host B's checks admitted in a row, before and after `held` are refunded, and the time taken. */
export async function burstAfterRefunds(
  hostB: RateLimitGuard,
  context: () => { executionId: string; userId: string },
  held: RateLimitLease[],
): Promise<{ ran: number; tookMs: number }> {
  const inARow = async () => {
    let admitted = 0;
    for (;;) {
      const ok = await hostB.acquire(context()).then(
        () => true,
        () => false,
      );
      if (!ok) return admitted;
      admitted++;
    }
  };
  const before = performance.now();
  let ran = await inARow();
  // Host A's units never ran; refunded now, they hold nothing any more.
  for (const lease of held) await lease.refund();
  ran += await inARow();
  return { ran, tookMs: performance.now() - before };
}
