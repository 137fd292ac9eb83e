// 2 000 mixed executions (benign code and attacks in a seeded random order) at concurrency 8 on
// one engine: every one ends with its expected terminal event, the engine serves normally
// afterwards, and the host's resident memory grows by less than a stated bound.
// `pnpm --filter @coda/integration-tests soak` (SOAK=long) runs 20 000.
import type { SandboxEvent } from '@coda/sandbox-core';
import { SandboxEngine } from '@coda/sandbox-isolate';
import { afterAll, describe, expect, it } from 'vitest';
import { eventsOf, expectServing } from '../support/events.ts';
import { drawCases, isCollateral, killedItsWorker } from './mix.ts';

const long = process.env.SOAK === 'long';
const total = long ? 20_000 : 2_000;
const concurrency = 8;
const seed = 7;
/** Host RSS may grow by this much from after warm-up to the end, whatever the run's length. */
const rssBoundBytes = 96 * 1024 * 1024;
/** An execution must end within its time limit plus this (queueing, a worker restart, load). */
const hangBoundMs = 30_000;

const engine = new SandboxEngine({
  maxConcurrent: concurrency,
  // Benign code ends in milliseconds; a generous limit keeps CPU starvation by concurrent
  // attacks (on 2 cores) from turning it into TIMEOUT. Attacks set their own short limits.
  limits: { timeoutMs: 20_000 },
  dataHandler: (params) => params,
});
afterAll(() => engine.dispose());

function settleGarbage(): void {
  (globalThis as { gc?: () => void }).gc?.();
}

async function withHangBound<T>(promise: Promise<T>, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const hang = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new Error(`${what} did not end within ${hangBoundMs} ms`)),
      hangBoundMs,
    );
  });
  try {
    return await Promise.race([promise, hang]);
  } finally {
    clearTimeout(timer);
  }
}

describe(`soak: ${total} mixed executions at concurrency ${concurrency}`, () => {
  it('every execution ends as expected, the engine still serves, host RSS stays bounded', async () => {
    await engine.ready();
    const cases = drawCases(total, seed);
    const warmUp = Math.min(200, total / 10);
    const failures: string[] = [];
    const collateral: string[] = [];
    let workerKills = 0;
    const workerPids = new Set(engine.stats().workerPids);
    const counts = new Map<string, number>();
    let next = 0;
    let baseline = 0;
    let peakRss = 0;
    const started = performance.now();

    const lane = async () => {
      while (next < total) {
        const i = next++;
        const soakCase = cases[i]!;
        if (i === warmUp) {
          settleGarbage();
          baseline = process.memoryUsage.rss();
        }
        const events: SandboxEvent[] = await withHangBound(
          eventsOf(
            engine.submit({
              code: soakCase.code(i),
              ...(soakCase.limits ? { limits: soakCase.limits } : {}),
            }),
          ),
          `execution ${i} (${soakCase.name})`,
        );
        if (killedItsWorker(events.at(-1))) workerKills++;
        for (const pid of engine.stats().workerPids) workerPids.add(pid);
        try {
          soakCase.check(events, i);
          counts.set(soakCase.name, (counts.get(soakCase.name) ?? 0) + 1);
        } catch (error) {
          const line = `#${i} ${soakCase.name}: ${(error as Error).message.slice(0, 300)}`;
          if (isCollateral(events.at(-1))) collateral.push(line);
          else failures.push(line);
        }
        if (i % 100 === 0) peakRss = Math.max(peakRss, process.memoryUsage.rss());
      }
    };
    await Promise.all(Array.from({ length: concurrency }, lane));
    const seconds = (performance.now() - started) / 1_000;

    await engine.ready();
    for (const pid of engine.stats().workerPids) workerPids.add(pid);
    const replacedWorkers = workerPids.size - 2;
    settleGarbage();
    const growth = process.memoryUsage.rss() - baseline;
    console.log(
      `soak: ${total} executions in ${seconds.toFixed(1)} s (${(total / seconds).toFixed(0)}/s), ` +
        `host RSS growth ${(growth / 1024 / 1024).toFixed(1)} MiB (bound ${rssBoundBytes / 1024 / 1024} MiB), ` +
        `peak ${(peakRss / 1024 / 1024).toFixed(0)} MiB, ` +
        `workers replaced ${replacedWorkers} (${workerKills} reported as the cause), collateral ${collateral.length} ${JSON.stringify(collateral.slice(0, 5))}, ` +
        `mix ${JSON.stringify(Object.fromEntries(counts))}`,
    );
    expect(failures.slice(0, 10)).toEqual([]);
    // An execution may end as collateral only with its worker: a kill ends at most the
    // `concurrency` executions the worker held. Kills stay rare: at most 1 % of executions.
    expect(collateral.length).toBeLessThanOrEqual(replacedWorkers * concurrency);
    expect(replacedWorkers).toBeLessThanOrEqual(total / 100);
    expect([...counts.values()].reduce((sum, n) => sum + n, 0) + collateral.length).toBe(total);
    expect(growth).toBeLessThan(rssBoundBytes);

    // Afterwards the engine serves normally: nothing active, workers up, fresh executions succeed.
    expect(engine.stats().active).toBe(0);
    await engine.ready();
    expect(engine.stats().workerPids).toHaveLength(2);
    await expectServing(engine);
  }, 600_000);
});
