// A worker whose resident memory grew while it ran executions (heaps V8 or malloc kept, pages not
// given back) is replaced as soon as it holds no job: left alone, that growth counted against
// the next execution's resident-memory bound, which then ended OOM for memory it never used
// (CI, stop 28: the last row of attack-23-review's heap table, rssMb 315 over a bound of 304,
// after five rows had grown the idle worker from 75 to 253 MiB). Real workers, real /proc.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SandboxEngine } from '../src/index.ts';
import { expectResult } from './helpers.ts';

/** Grows the worker process, not the isolate: 1.5 M objects parsed on the worker's own heap. */
const growTheWorker = {
  code: 'const r = await dataProxy.request({ objects: 1500000 }); return r.length',
  limits: { maxDataBytes: 1e9 },
};
const small = { code: 'return 6 * 7' };

function engineWith(workerBaseMemoryMb: number) {
  const replaced: { rssMb: number; limitMb: number }[] = [];
  const deaths: unknown[] = [];
  const ignore = () => {};
  const engine = new SandboxEngine({
    workers: 1,
    workerBaseMemoryMb,
    dataHandler: (params) => {
      const objects = (params as { objects?: number } | null)?.objects ?? 0;
      return Array.from({ length: objects }, () => ({}));
    },
    logger: {
      debug: ignore,
      info: (object: unknown, message?: string) => {
        if (message?.startsWith('sandbox worker process replaced while idle')) {
          replaced.push(object as { rssMb: number; limitMb: number });
        }
      },
      warn: (object: unknown, message?: string) => {
        if (message === 'sandbox worker process ended') deaths.push(object);
      },
      error: ignore,
    },
  });
  return { engine, replaced, deaths };
}

async function pidsAfterReplacement(engine: SandboxEngine, before: number[]): Promise<number[]> {
  for (let waited = 0; waited < 10_000; waited += 20) {
    const pids = engine.stats().workerPids;
    // Empty while the old worker is being killed; then the new one's.
    if (pids.length > 0 && pids[0] !== before[0]) return pids;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  return engine.stats().workerPids;
}

describe('a worker grown by past executions is replaced while idle (process)', () => {
  // Half of 64 MiB above its resident memory when ready: 32 MiB of growth replaces it.
  const { engine, replaced, deaths } = engineWith(64);
  beforeAll(() => engine.ready(), 120_000);
  afterAll(() => engine.dispose());

  it('replaced after the execution that grew it, which keeps its result; the next one runs', async () => {
    const before = engine.stats().workerPids;
    expect(expectResult(await engine.run(growTheWorker)).payload).toBe(1_500_000);
    const after = await pidsAfterReplacement(engine, before);
    expect(after).toHaveLength(1);
    expect(after[0]).not.toBe(before[0]);
    expect(replaced).toHaveLength(1);
    expect(replaced[0]!.rssMb).toBeGreaterThan(replaced[0]!.limitMb);
    expect(deaths).toEqual([]);
    expect(expectResult(await engine.run(small)).payload).toBe(42);
  }, 60_000);
});

describe('a worker that did not grow is kept (process)', () => {
  const { engine, replaced } = engineWith(256);
  beforeAll(() => engine.ready(), 120_000);
  afterAll(() => engine.dispose());

  it('ten small executions: the same worker, nothing replaced', async () => {
    const before = engine.stats().workerPids;
    for (let run = 0; run < 10; run++) {
      expect(expectResult(await engine.run(small)).payload).toBe(42);
    }
    expect(engine.stats().workerPids).toEqual(before);
    expect(replaced).toEqual([]);
  }, 60_000);
});
