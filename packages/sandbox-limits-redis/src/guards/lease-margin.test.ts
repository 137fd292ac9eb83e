import { describe, expect, it } from 'vitest';
import { warningRecorder } from '../../test/warning-recorder.ts';
import { createMemoryLimitStore } from '../store/memory-store.ts';
import { createConcurrencyGuard } from './concurrency-guard.ts';

// The latest a store call's answer may come for `timeoutMs` 1 000: the deadline watcher ticks
// every tenth of it and gives up at the tick after the deadline (store-call.ts), 1 100 ms.
const warning =
  'leaseTtlMs - renewEveryMs is not longer than a store call may take: a running execution can lose its lease to a late renewal';

describe('concurrency guard: the lease margin', () => {
  it.each([
    // [leaseTtlMs, renewEveryMs, warned]
    [1_000, 400, true],
    [1_500, 400, true],
    [1_600, 400, false],
    [15_000, undefined, false],
    [3_000, undefined, false],
    [1_500, undefined, true],
  ])('leaseTtlMs %d, renewEveryMs %s: warned %s', (leaseTtlMs, renewEveryMs, warned) => {
    const { warnings, logger } = warningRecorder();
    createConcurrencyGuard({
      store: createMemoryLimitStore(),
      maxPerUser: 1,
      leaseTtlMs,
      renewEveryMs,
      timeoutMs: 1_000,
      logger,
    });
    expect(warnings).toEqual(warned ? [warning] : []);
  });
});
