// The host stays responsive while hostile code runs: at maxConcurrent executions at once, the
// host's event loop is never blocked for long and its memory does not grow with what user code
// tries to push across. Real isolates, real worker processes.
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { afterAll, describe, expect, it } from 'vitest';
import { hostileSnippets } from '../bench/hostile-snippets.ts';
import { SandboxEngine } from '../src/index.ts';

const maxConcurrent = 8;
const engine = new SandboxEngine({
  maxConcurrent,
  dataHandler: () => 'ok',
  // The table's status flood (2 000 × 1 MB of status data, every one encoded) is seconds of CPU
  // alone; three copies among 24 runs at 8 at once on 2 cores took past 20 s in a fresh-clone CI
  // run (TIMEOUT instead of its result). The limit is not what this file measures.
  limits: { timeoutMs: 60_000 },
});
afterAll(() => engine.dispose());

describe('the host stays responsive under the hostile table', () => {
  it(`keeps event-loop delay p99 low and RSS growth under 50 MB at ${maxConcurrent} at once`, async () => {
    await engine.ready();
    // One warm-up round, so the figures are of steady state rather than of the first builds.
    await Promise.all(hostileSnippets.map(({ code }) => engine.run({ code })));
    globalThis.gc?.();
    const rssBefore = process.memoryUsage().rss;
    let rssPeak = rssBefore;
    const sampler = setInterval(() => {
      rssPeak = Math.max(rssPeak, process.memoryUsage().rss);
    }, 20);
    const delay = monitorEventLoopDelay({ resolution: 5 });
    delay.enable();
    const jobs = Array.from({ length: 3 }, () => hostileSnippets).flat();
    const codes: string[] = [];
    // maxConcurrent at once: a new one starts as soon as one ends.
    let next = 0;
    await Promise.all(
      Array.from({ length: maxConcurrent }, async () => {
        while (next < jobs.length) {
          const job = jobs[next++]!;
          const event = await engine.run({ code: job.code });
          codes.push(`${job.name}: ${event.type === 'result' ? 'result' : event.code}`);
        }
      }),
    );
    delay.disable();
    clearInterval(sampler);
    expect(codes.sort()).toEqual(jobs.map((job) => `${job.name}: ${job.expected}`).sort());
    const p99Ms = delay.percentile(99) / 1e6;
    console.log(
      `host event-loop delay p99 ${p99Ms.toFixed(1)} ms, RSS growth ${((rssPeak - rssBefore) / 1048576).toFixed(1)} MiB`,
    );
    // The requirement is 50 ms, which the benchmark shows on a quiet machine (docs/performance.md);
    // here other test files load the same two cores, so the bound is generous. The stall this
    // guards against was 4-6 s.
    expect(p99Ms).toBeLessThan(250);
    expect(rssPeak - rssBefore).toBeLessThan(50 * 1024 * 1024);
  }, 120_000);
});
