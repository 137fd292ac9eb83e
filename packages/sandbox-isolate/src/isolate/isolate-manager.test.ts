import { isSandboxError } from '@coda/sandbox-core';
import { afterEach, describe, expect, it } from 'vitest';
import { ContextBuilder } from './context-builder.ts';
import { IsolateManager } from './isolate-manager.ts';

const managers: IsolateManager[] = [];
function manager(options: { maxConcurrent?: number; poolSize?: number } = {}) {
  const created = new IsolateManager({
    contextBuilder: new ContextBuilder(),
    maxConcurrent: options.maxConcurrent ?? 2,
    poolSize: options.poolSize ?? 2,
    poolMemoryMb: 64,
  });
  managers.push(created);
  return created;
}
afterEach(() => {
  for (const created of managers.splice(0)) created.dispose();
});
const tick = () => new Promise((resolve) => setImmediate(resolve));
/** Past the moment a released isolate is disposed and the refill starts (1 ms after release). */
const afterRelease = () => new Promise((resolve) => setTimeout(resolve, 2));

describe('IsolateManager', () => {
  it('keeps a warm pool and hands out each isolate once', async () => {
    const pool = manager();
    await pool.warm();
    expect(pool.pooledCount).toBe(2);
    const first = await pool.acquire();
    expect(pool.pooledCount).toBe(1);
    expect(first.memoryMb).toBe(64);
    pool.release(first);
    expect(first.isolate.isDisposed).toBe(false);
    await afterRelease();
    expect(first.isolate.isDisposed).toBe(true);
    await pool.warm();
    expect(pool.pooledCount).toBe(2);
    const second = await pool.acquire();
    expect(second).not.toBe(first);
    expect(second.isolate.isDisposed).toBe(false);
    pool.release(second);
  });

  it('with the pool empty, takes the isolate the refill is building instead of building another', async () => {
    let builds = 0;
    class CountingBuilder extends ContextBuilder {
      override prepare(memoryMb: number, warm?: boolean) {
        builds++;
        return super.prepare(memoryMb, warm);
      }
    }
    const pool = new IsolateManager({
      contextBuilder: new CountingBuilder(),
      maxConcurrent: 4,
      poolSize: 1,
      poolMemoryMb: 64,
    });
    managers.push(pool);
    await pool.warm();
    pool.release(await pool.acquire());
    await afterRelease();
    await tick();
    expect(builds).toBe(2); // the refill is building
    const claimed = await pool.acquire();
    expect(builds).toBe(2);
    expect(claimed.isolate.isDisposed).toBe(false);
    expect(pool.pooledCount).toBe(0);
    // Between two refill builds there is nothing to claim: this acquirer builds its own.
    const other = await pool.acquire();
    expect(other).not.toBe(claimed);
    expect(other.isolate.isDisposed).toBe(false);
    pool.release(claimed);
    pool.release(other);
    await pool.warm();
    expect(pool.pooledCount).toBe(1);
  });

  it('refuses at maxConcurrent with "IsolateManager at capacity (N)", and frees the slot on release', async () => {
    const pool = manager({ maxConcurrent: 2, poolSize: 0 });
    const a = await pool.acquire();
    const b = await pool.acquire();
    let caught: unknown;
    try {
      await pool.acquire();
    } catch (error) {
      caught = error;
    }
    expect(isSandboxError(caught)).toBe(true);
    expect(caught).toMatchObject({
      code: 'CAPACITY',
      message: 'IsolateManager at capacity (2)',
      details: { maxConcurrent: 2 },
    });
    pool.release(a);
    expect(pool.activeCount).toBe(1);
    const c = await pool.acquire();
    pool.release(b);
    pool.release(c);
    pool.release(c);
    expect(pool.activeCount).toBe(0);
  });

  it('builds an isolate with exactly the requested memory limit when the pool has none', async () => {
    const pool = manager();
    await pool.warm();
    const small = await pool.acquire(16);
    expect(small.memoryMb).toBe(16);
    expect(pool.pooledCount).toBe(2);
    const limit = small.isolate.getHeapStatisticsSync().heap_size_limit;
    const pooled = await pool.acquire();
    expect(pooled.isolate.getHeapStatisticsSync().heap_size_limit).toBeGreaterThan(limit);
    pool.release(small);
    pool.release(pooled);
  });

  it('disposes every isolate on dispose and refuses afterwards', async () => {
    const pool = manager();
    await pool.warm();
    const active = await pool.acquire();
    pool.dispose();
    expect(active.isolate.isDisposed).toBe(true);
    expect(pool.pooledCount).toBe(0);
    await expect(pool.acquire()).rejects.toMatchObject({ code: 'CAPACITY' });
  });
});
