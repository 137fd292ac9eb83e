// A worker process killed from outside (OOM killer, an operator, a crash) mid-execution: that
// execution ends with CRASH, the worker is replaced, and the next execution succeeds.
import { randomUUID } from 'node:crypto';
import { SandboxEngine } from '@coda/sandbox-isolate';
import { createLimitGuards, createRedisLimitStore, fromIoredis } from '@coda/sandbox-limits-redis';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, inject, it, onTestFinished, vi } from 'vitest';
import { asError, asResult, expectServing } from '../support/events.ts';

let releaseHeld: () => void = () => {};
const held = new Promise<void>((resolve) => {
  releaseHeld = resolve;
});
let inHandler = 0;
const engine = new SandboxEngine({
  workers: 1,
  limits: { timeoutMs: 20_000 },
  dataHandler: async () => {
    inHandler++;
    await held;
    return 'answered';
  },
});
afterAll(async () => {
  releaseHeld();
  await engine.dispose();
});

async function onlyWorker(): Promise<number> {
  await engine.ready();
  const pids = engine.stats().workerPids;
  expect(pids).toHaveLength(1);
  return pids[0]!;
}

describe('a worker killed from outside', () => {
  it('while the isolate runs code: CRASH, then the next execution succeeds on a new worker', async () => {
    const victim = await onlyWorker();
    const handle = engine.submit({ code: 'reportStatus("spinning"); while (true) {}' });
    // Kill only once the code is really running inside the worker.
    for await (const event of handle) {
      if (event.type === 'status') break;
    }
    process.kill(victim, 'SIGKILL');
    const started = performance.now();
    const event = asError(await handle.result, 'CRASH');
    expect(event.message).toContain('SIGKILL');
    expect(performance.now() - started).toBeLessThan(10_000);
    const next = await engine.run({ code: 'return "next"' });
    expect(asResult(next).payload).toBe('next');
    expect(await onlyWorker()).not.toBe(victim);
  });

  it('while the execution waits on the host: CRASH, the pending request is abandoned, the engine serves', async () => {
    const victim = await onlyWorker();
    const pending = engine.run({ code: 'return await dataProxy.request({ slow: true })' });
    await vi.waitFor(() => expect(inHandler).toBe(1), { timeout: 10_000, interval: 10 });
    process.kill(victim, 'SIGKILL');
    expect(asError(await pending, 'CRASH').message).toContain('SIGKILL');
    releaseHeld();
    await expectServing(engine);
    expect(engine.stats().active).toBe(0);
  });

  it("gives back the user's concurrency slot in Redis: the user's next execution is admitted at once", async () => {
    const client = new Redis(inject('redisUrl'), { maxRetriesPerRequest: 1 });
    const guarded = new SandboxEngine({
      workers: 1,
      limits: { timeoutMs: 20_000 },
      guards: createLimitGuards({
        store: createRedisLimitStore({
          client: fromIoredis(client),
          keyPrefix: `it:killed:${randomUUID()}:`,
        }),
        // One at a time, and a lease that would outlive the test if the crash leaked it.
        concurrency: { maxPerUser: 1, leaseTtlMs: 60_000 },
      }),
    });
    onTestFinished(async () => {
      await guarded.dispose();
      await client.quit();
    });
    await guarded.ready();
    const context = { userId: 'u-killed' };
    const handle = guarded.submit({ code: 'reportStatus("spinning"); while (true) {}', context });
    for await (const event of handle) {
      if (event.type === 'status') break;
    }
    process.kill(guarded.stats().workerPids[0]!, 'SIGKILL');
    asError(await handle.result, 'CRASH');
    const next = await guarded.run({ code: 'return "admitted"', context });
    expect(asResult(next).payload).toBe('admitted');
  });
});
