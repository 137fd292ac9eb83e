// Child process of the benchmark: the host's event-loop delay and RSS growth while one table of
// snippets runs at maxConcurrent executions at once, in a process that does nothing else.
// Usage: responsiveness-probe.ts <hostile|benign|idle> <rounds>. Prints one JSON line.
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { SandboxEngine } from '../src/index.ts';
import { benignSnippets, hostileSnippets } from './hostile-snippets.ts';

const table = process.argv[2] ?? 'hostile';
const rounds = Number(process.argv[3] ?? 3);
const maxConcurrent = 8;
/** The sampling interval of the event-loop delay histogram: an idle loop reads about this. */
const resolutionMs = 5;
const snippets = table === 'hostile' ? hostileSnippets : table === 'benign' ? benignSnippets : [];

// The same engine as test/host-responsiveness.test.ts.
const engine = new SandboxEngine({
  maxConcurrent,
  dataHandler: () => 'ok',
  limits: { timeoutMs: 20_000 },
});
await engine.ready();

async function runAll(jobs: readonly (typeof snippets)[number][]): Promise<string[]> {
  const mismatches: string[] = [];
  // maxConcurrent at once: a new one starts as soon as one ends.
  let next = 0;
  await Promise.all(
    Array.from({ length: maxConcurrent }, async () => {
      while (next < jobs.length) {
        const job = jobs[next++];
        if (job === undefined) break;
        const event = await engine.run({ code: job.code });
        const outcome = event.type === 'result' ? 'result' : event.code;
        if (outcome !== job.expected) mismatches.push(`${job.name}: ${outcome}`);
      }
    }),
  );
  return mismatches;
}

// One warm-up round, so the figures are of steady state rather than of the first builds.
await runAll(snippets);
global.gc?.();
await new Promise((resolve) => setTimeout(resolve, 200));
const rssBefore = process.memoryUsage().rss;
let rssPeak = rssBefore;
const sampler = setInterval(() => {
  rssPeak = Math.max(rssPeak, process.memoryUsage().rss);
}, 20);
const delay = monitorEventLoopDelay({ resolution: resolutionMs });
delay.enable();
const jobs = Array.from({ length: rounds }, () => snippets).flat();
const started = performance.now();
const mismatches = table === 'idle' ? [] : await runAll(jobs);
if (table === 'idle') await new Promise((resolve) => setTimeout(resolve, 2_000));
const wallMs = performance.now() - started;
delay.disable();
clearInterval(sampler);
rssPeak = Math.max(rssPeak, process.memoryUsage().rss);
await engine.dispose();
console.log(
  JSON.stringify({
    table,
    jobs: jobs.length,
    mismatches,
    wallMs,
    resolutionMs,
    delaySamples: delay.count,
    p50Ms: delay.percentile(50) / 1e6,
    p99Ms: delay.percentile(99) / 1e6,
    maxMs: delay.max / 1e6,
    rssBeforeMb: rssBefore / 1_048_576,
    rssGrowthMb: (rssPeak - rssBefore) / 1_048_576,
  }),
);
