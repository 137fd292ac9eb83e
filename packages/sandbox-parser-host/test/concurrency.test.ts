// maxConcurrent and its queue, cancellation, closing, and the warm spare.
import { describe, expect, it } from 'vitest';
import { makeHost } from './helpers.ts';

describe('concurrency', () => {
  it('50 concurrent calls all succeed, never more than maxConcurrent children at once', async () => {
    const host = makeHost({ maxConcurrent: 3, warmSpare: true });
    let peak = 0;
    const sampler = setInterval(() => {
      peak = Math.max(peak, host.load.running);
    }, 2);
    const results = await Promise.all(
      Array.from({ length: 50 }, (_, index) => host.runParser('echo', { index })),
    );
    clearInterval(sampler);
    expect(results.every((result) => result.ok)).toBe(true);
    expect(
      results.map((result) => (result.data as { payload: { index: number } }).payload.index),
    ).toEqual(Array.from({ length: 50 }, (_, index) => index));
    expect(peak).toBeLessThanOrEqual(3);
    expect(peak).toBeGreaterThan(0);
    expect(host.load).toEqual({ running: 0, queued: 0 });
  });

  it('refuses a call at once when the queue is full', async () => {
    const host = makeHost({ maxConcurrent: 1, maxQueued: 1 });
    const running = host.runParser('sleep', { ms: 300 });
    const queued = host.runParser('echo', 1);
    const refused = await host.runParser('echo', 2);
    expect(refused).toMatchObject({
      ok: false,
      code: 'CAPACITY',
      error: 'parser host queue is full (1)',
      exitCode: null,
    });
    expect((await running).ok).toBe(true);
    expect((await queued).ok).toBe(true);
  });

  it('an abort signal cancels a queued call and a running one', async () => {
    const host = makeHost({ maxConcurrent: 1 });
    const controller = new AbortController();
    const running = host.runParser('sleep', { ms: 30_000 }, { signal: controller.signal });
    const queued = host.runParser('echo', 1, { signal: controller.signal });
    setTimeout(() => controller.abort(), 300);
    expect(await queued).toMatchObject({ ok: false, code: 'CANCELLED', exitCode: null });
    expect(await running).toMatchObject({
      ok: false,
      code: 'CANCELLED',
      error: 'parser call cancelled',
      timedOut: false,
      signal: 'SIGKILL',
    });
    const already = await host.runParser('echo', 1, { signal: AbortSignal.abort() });
    expect(already).toMatchObject({ ok: false, code: 'CANCELLED' });
  });

  it('close ends running calls and refuses later ones', async () => {
    const host = makeHost({ warmSpare: true });
    await host.warm();
    const running = host.runParser('sleep', { ms: 30_000 });
    await new Promise((resolve) => setTimeout(resolve, 200));
    await host.close();
    expect(await running).toMatchObject({
      ok: false,
      code: 'CANCELLED',
      error: 'parser host closed',
    });
    expect(await host.runParser('echo', 1)).toMatchObject({
      ok: false,
      code: 'UNAVAILABLE',
      error: 'parser host is closed',
    });
  });

  it('an `await using` block closes the host as close() does', async () => {
    let outlived: ReturnType<typeof makeHost> | undefined;
    let running: ReturnType<ReturnType<typeof makeHost>['runParser']> | undefined;
    {
      await using host = makeHost({ warmSpare: true });
      outlived = host;
      await host.warm();
      running = host.runParser('sleep', { ms: 30_000 });
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    expect(await running).toMatchObject({ ok: false, code: 'CANCELLED' });
    expect(await outlived.runParser('echo', 1)).toMatchObject({ ok: false, code: 'UNAVAILABLE' });
  });

  it('the warm spare serves default-limit calls and is replaced after each', async () => {
    const messages: string[] = [];
    const record = (fields: object | string, message?: string): void => {
      messages.push(typeof fields === 'string' ? fields : (message ?? ''));
    };
    const logger = { debug: record, info: record, warn: record, error: record };
    const host = makeHost({ warmSpare: true, logger });
    await host.warm();
    const warm = await host.runParser('echo', 'warm');
    await host.warm();
    const again = await host.runParser('echo', 'again');
    // Other limits cannot use the spare (its heap and CPU limits are fixed at spawn): cold child.
    const cold = await host.runParser('echo', 'cold', { cpuSecs: 2 });
    for (const result of [warm, again, cold])
      expect(result).toMatchObject({ ok: true, exitCode: 0 });
  });

  it('a spare that died while waiting is replaced, and the call still succeeds', async () => {
    const started: number[] = [];
    const taken: number[] = [];
    let died = false;
    const log = (fields: object | string, message?: string): void => {
      const pid = typeof fields === 'object' ? (fields as { pid?: unknown }).pid : undefined;
      if (message === 'warm spare exited while waiting') died = true;
      if (typeof pid !== 'number') return;
      if (message === 'parser child started') started.push(pid);
      if (message === 'parser call takes the warm spare') taken.push(pid);
    };
    const host = makeHost({
      warmSpare: true,
      logger: { debug: log, info: log, warn: log, error: log },
    });
    await host.warm();
    process.kill(started[0] as number, 'SIGKILL');
    await expect.poll(() => died, { timeout: 10_000 }).toBe(true);
    expect(await host.runParser('echo', 1)).toMatchObject({ ok: true });
    expect(taken).toEqual([]);
    await expect.poll(() => started.length, { timeout: 10_000 }).toBe(3);
    await host.warm();
    expect(await host.runParser('echo', 2)).toMatchObject({ ok: true });
    expect(taken).toEqual([started[2]]);
  });
});
