import { silentLogger } from '@coda/sandbox-core';
import { describe, expect, it } from 'vitest';
import { warningRecorder } from '../../test/warning-recorder.ts';
import { createMemoryLimitStore } from '../store/memory-store.ts';
import { createStoreCaller } from './store-call.ts';
import { createWarner } from './warnings.ts';

const never = () => new Promise<number>(() => {});
const primary = createMemoryLimitStore();
const settings = (failMode: 'open' | 'closed' | 'insurance') => ({
  name: 'g',
  store: primary,
  failMode,
  timeoutMs: 100,
});

describe('createStoreCaller', () => {
  it('gives up after timeoutMs (and at most a tick more) with UNAVAILABLE when closed', async () => {
    const call = createStoreCaller(settings('closed'), createWarner(silentLogger, 'g'));
    const started = performance.now();
    const error = await call('op', never).catch((reason: unknown) => reason);
    const elapsed = performance.now() - started;
    expect(error).toMatchObject({
      code: 'UNAVAILABLE',
      details: { guard: 'g', failMode: 'closed' },
    });
    expect(elapsed).toBeGreaterThanOrEqual(99);
    expect(elapsed).toBeLessThan(1_000);
  });

  it('answers { ok: false } and warns once per burst when open', async () => {
    const { warnings, logger } = warningRecorder();
    const call = createStoreCaller(settings('open'), createWarner(logger, 'g'));
    const outcomes = await Promise.all([
      call('op', never),
      call('op', () => Promise.reject(new Error('down'))),
      call('op', () => {
        throw new Error('thrown');
      }),
    ]);
    expect(outcomes).toEqual([{ ok: false }, { ok: false }, { ok: false }]);
    expect(warnings).toHaveLength(1);
  });

  it('hands a late answer to undo, and a cancelled call rejects with CANCELLED', async () => {
    const call = createStoreCaller(settings('closed'), createWarner(silentLogger, 'g'));
    const undone: number[] = [];
    let answer: (value: number) => void = () => {};
    const late = new Promise<number>((resolve) => {
      answer = resolve;
    });
    const controller = new AbortController();
    const pending = call(
      'op',
      () => late,
      controller.signal,
      (value) => undone.push(value),
    );
    controller.abort();
    expect(await pending.catch((reason: unknown) => reason)).toMatchObject({ code: 'CANCELLED' });
    answer(7);
    await late;
    await Promise.resolve();
    expect(undone).toEqual([7]);
    expect(await call('op', async () => 1)).toEqual({ ok: true, value: 1, insured: false });
  });

  it('runs the operation on its own memory store when insured, after a warning', async () => {
    const { warnings, logger } = warningRecorder();
    const call = createStoreCaller(settings('insurance'), createWarner(logger, 'g'));
    const rule = { limit: 1, windowMs: 60_000, burst: 1 };
    const failing = (store: Parameters<Parameters<typeof call>[1]>[0]) =>
      store === primary ? Promise.reject(new Error('down')) : store.rateLimit('k', rule);
    const first = await call('rateLimit', failing);
    expect(first).toMatchObject({
      ok: true,
      insured: true,
      value: { allowed: true, remaining: 0 },
    });
    // The insurance store keeps its counts: this host alone enforces the limit.
    const second = await call('rateLimit', failing);
    expect(second).toMatchObject({ ok: true, insured: true, value: { allowed: false } });
    // A timeout falls back too.
    const late = await call('rateLimit', (store) =>
      store === primary ? new Promise<never>(() => {}) : store.rateLimit('other', rule),
    );
    expect(late).toMatchObject({ ok: true, insured: true, value: { allowed: true } });
    expect(warnings).toEqual([
      'g: limit store failed (rateLimit); failMode insurance, this host enforces the limit alone',
    ]);
    // The store answering again is used again.
    expect(await call('rateLimit', (store) => store.rateLimit('k2', rule))).toMatchObject({
      ok: true,
      insured: false,
    });
  });

  it('expires the calls in flight in the order they began, skipping those that settled', async () => {
    const call = createStoreCaller(settings('closed'), createWarner(silentLogger, 'g'));
    const order: string[] = [];
    const record = (name: string) => (error: unknown) => {
      order.push(`${name}:${(error as { code?: string }).code}`);
    };
    const first = call('op', never).catch(record('first'));
    const quick = call('op', async () => 1);
    const cancelled = new AbortController();
    const aborted = call('op', never, cancelled.signal).catch(record('aborted'));
    cancelled.abort();
    await new Promise((resolve) => setTimeout(resolve, 30));
    const second = call('op', never).catch(record('second'));
    expect(await quick).toEqual({ ok: true, value: 1, insured: false });
    await Promise.all([first, aborted, second]);
    expect(order).toEqual(['aborted:CANCELLED', 'first:UNAVAILABLE', 'second:UNAVAILABLE']);
    // The list is empty again: a new call after all that still times out.
    expect(await call('op', never).catch((error: unknown) => error)).toMatchObject({
      code: 'UNAVAILABLE',
    });
  });
});
