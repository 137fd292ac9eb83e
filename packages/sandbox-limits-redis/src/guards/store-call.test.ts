import { type Logger, silentLogger } from '@coda/sandbox-core';
import { describe, expect, it } from 'vitest';
import { createStoreCaller } from './store-call.ts';
import { createWarner } from './warnings.ts';

const never = () => new Promise<number>(() => {});
const settings = (failMode: 'open' | 'closed') => ({ name: 'g', failMode, timeoutMs: 100 });

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
    const warnings: string[] = [];
    const logger: Logger = {
      ...silentLogger,
      warn: (fields: object | string, message?: string) => {
        warnings.push(typeof fields === 'string' ? fields : (message ?? ''));
      },
    };
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
    expect(await call('op', async () => 1)).toEqual({ ok: true, value: 1 });
  });
});
