// `pnpm bench`: the parser host under back-to-back load, both runtimes, against seed 004's
// design in the same run: a fresh child per call doing the same parse, `python3` (the seed's own
// child: RLIMIT_AS/RLIMIT_CPU, JSON over stdin/stdout) and `node` (the same design in Node):
//
// - back to back at concurrency 1: each call starts when the previous one has its result; p50
//   and p90 of the call's round trip;
// - concurrency 8: 8 calls in flight at all times; calls per second over the whole burst;
// - the memory of the idle spares, fork-server slots or isolate child (every process a host keeps waiting,
//   bwrap's included), resident and proportional (shared pages split), read from /proc after
//   `warm()`.
//
// The cases run interleaved in `BENCH_ROUNDS` rounds (a fresh host per case and round), so that
// the load of a shared machine falls on all of them alike; the figures are medians over rounds.
// Prints the table that docs/performance.md records, and issue 25's targets (p50 ≤ 0.3× and
// calls/s ≥ 3× the python3 reference) with each runtime's best case.
import { readFileSync } from 'node:fs';
import { cpus, loadavg, release } from 'node:os';
import { fileURLToPath } from 'node:url';
import type { ParserHost, ParserHostOptions } from '../src/index.ts';
import { python, runReference } from './reference-host.ts';

// The built package, as users run it (from src/, Node would strip types from the runner on
// every start, which costs a cold Node child tens of milliseconds).
const distEntry = new URL('../dist/index.js', import.meta.url).href;
const { createParserHost } = (await import(distEntry)) as typeof import('../src/index.ts');

const nodeModule = fileURLToPath(new URL('./fixtures/parsers.mjs', import.meta.url));
const pythonModule = fileURLToPath(new URL('./fixtures/parsers.py', import.meta.url));
const payload = {
  feed: 'telemetry',
  frames: [
    { t: 1_700_000_000, values: [1.5, 2.25, 3] },
    { t: 1_700_000_003, values: [4, 5.5, 6.75] },
  ],
  tags: { site: 'north', unit: 'kPa' },
};
const sequentialCalls = Number(process.env.BENCH_CALLS ?? 40);
const concurrentCalls = Number(process.env.BENCH_CONCURRENT_CALLS ?? 120);
const rounds = Number(process.env.BENCH_ROUNDS ?? 3);
const concurrency = 8;
const spares = Number(process.env.BENCH_SPARES ?? 8);

type Call = () => Promise<{ ok: boolean; error?: string }>;

function expectOk(result: { ok: boolean; error?: string }): void {
  if (!result.ok) throw new Error(`benchmark call failed: ${result.error}`);
}

function percentile(values: number[], fraction: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  const at = (sorted.length - 1) * fraction;
  const low = Math.floor(at);
  const high = Math.ceil(at);
  return (sorted[low] ?? 0) + ((sorted[high] ?? 0) - (sorted[low] ?? 0)) * (at - low);
}

async function backToBack(call: Call): Promise<number[]> {
  const latencies: number[] = [];
  for (let index = 0; index < sequentialCalls; index++) {
    const started = performance.now();
    expectOk(await call());
    latencies.push(performance.now() - started);
  }
  return latencies;
}

async function throughput(call: Call): Promise<number> {
  let next = 0;
  const started = performance.now();
  const worker = async (): Promise<void> => {
    while (next++ < concurrentCalls) expectOk(await call());
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  return concurrentCalls / ((performance.now() - started) / 1000);
}

function descendants(pid: number): number[] {
  let children: number[] = [];
  try {
    children = readFileSync(`/proc/${pid}/task/${pid}/children`, 'latin1')
      .split(' ')
      .filter(Boolean)
      .map(Number);
  } catch {
    return [];
  }
  return [...children, ...children.flatMap(descendants)];
}

/** A `kB` field of a /proc file of `pid`, in bytes (0 when unreadable). */
function procKiB(pid: number, file: string, field: string): number {
  try {
    const match = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(
      readFileSync(`/proc/${pid}/${file}`, 'latin1'),
    );
    return match === null ? 0 : Number(match[1]) * 1024;
  } catch {
    return 0;
  }
}

/** Resident and proportional memory of every process this one started, summed. */
function childrenMemory(): { rss: number; pss: number } {
  const pids = descendants(process.pid);
  return {
    rss: pids.reduce((sum, pid) => sum + procKiB(pid, 'status', 'VmRSS'), 0),
    pss: pids.reduce((sum, pid) => sum + procKiB(pid, 'smaps_rollup', 'Pss'), 0),
  };
}

interface Sample {
  p50: number;
  p90: number;
  callsPerSecond: number;
  idle?: { rss: number; pss: number };
  confinement?: string;
}

interface Case {
  name: string;
  runtime: 'python' | 'node';
  /** Host options, or a reference run of that runtime. */
  options?: ParserHostOptions;
}

async function measureReference(runtime: 'python' | 'node'): Promise<Sample> {
  const call: Call = async () =>
    (await runReference(runtime, 'flatten', payload)) as { ok: boolean };
  await call(); // the page cache
  const latencies = await backToBack(call);
  return {
    p50: percentile(latencies, 0.5),
    p90: percentile(latencies, 0.9),
    callsPerSecond: await throughput(call),
  };
}

/** Waits (up to 5 s) until the processes of earlier cases have exited, for a clean baseline. */
async function noChildrenLeft(): Promise<void> {
  for (let waited = 0; waited < 5_000 && descendants(process.pid).length > 0; waited += 50) {
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

async function measureHost(options: ParserHostOptions): Promise<Sample> {
  await noChildrenLeft();
  const baseline = childrenMemory();
  const host: ParserHost = createParserHost({ maxConcurrent: concurrency, ...options });
  try {
    await host.warm();
    const after = childrenMemory();
    const { spares: pooled } = host.settings;
    const call: Call = () => host.runParser('flatten', payload);
    expectOk(await call());
    await host.warm();
    const latencies = await backToBack(call);
    await host.warm();
    const callsPerSecond = await throughput(call);
    const report = host.confinement;
    return {
      p50: percentile(latencies, 0.5),
      p90: percentile(latencies, 0.9),
      callsPerSecond,
      ...(pooled === 0
        ? {}
        : {
            idle: {
              rss: (after.rss - baseline.rss) / pooled,
              pss: (after.pss - baseline.pss) / pooled,
            },
          }),
      confinement: `${report?.sandbox}, memory via ${report?.memory}`,
    };
  } finally {
    await host.close();
  }
}

const median = (values: number[]): number => percentile(values, 0.5);

const cases: Case[] = [
  { name: 'python3 reference (seed 004: fresh python3 per call)', runtime: 'python' },
  { name: 'node reference (the same design: fresh node per call)', runtime: 'node' },
  {
    name: `python, confined, fork-server, ${spares} slots`,
    runtime: 'python',
    options: { module: pythonModule, python, spares, processModel: 'fork-server' },
  },
  {
    name: `python, confinement none, fork-server, ${spares} slots`,
    runtime: 'python',
    options: {
      module: pythonModule,
      python,
      spares,
      processModel: 'fork-server',
      confinement: 'none',
    },
  },
  {
    name: `python, confined, spawn, ${spares} spares`,
    runtime: 'python',
    options: { module: pythonModule, python, spares },
  },
  {
    name: `node, confined, spawn, ${spares} spares`,
    runtime: 'node',
    options: { module: nodeModule, spares },
  },
  // One child per host, a fresh isolated-vm isolate per call (the idle figure is that child).
  {
    name: 'node, confined, isolate (one child, an isolate per call)',
    runtime: 'node',
    options: { module: nodeModule, processModel: 'isolate' },
  },
  {
    name: 'node, confinement none, isolate (one child, an isolate per call)',
    runtime: 'node',
    options: { module: nodeModule, processModel: 'isolate', confinement: 'none' },
  },
];

const loads: number[] = [loadavg()[0] ?? 0];
const samples = new Map<Case, Sample[]>(cases.map((each) => [each, []]));
for (let round = 0; round < rounds; round++) {
  for (const each of cases) {
    const sample =
      each.options === undefined
        ? await measureReference(each.runtime)
        : await measureHost(each.options);
    samples.get(each)?.push(sample);
    loads.push(loadavg()[0] ?? 0);
  }
}

interface Row {
  name: string;
  runtime: 'python' | 'node';
  reference: boolean;
  p50: number;
  p90: number;
  callsPerSecond: number;
  idle?: { rss: number; pss: number };
  confinement?: string;
}

const rows: Row[] = cases.map((each) => {
  const taken = samples.get(each) ?? [];
  const idle = taken.flatMap((sample) => (sample.idle === undefined ? [] : [sample.idle]));
  return {
    name: each.name,
    runtime: each.runtime,
    reference: each.options === undefined,
    p50: median(taken.map((sample) => sample.p50)),
    p90: median(taken.map((sample) => sample.p90)),
    callsPerSecond: median(taken.map((sample) => sample.callsPerSecond)),
    ...(idle.length === 0
      ? {}
      : {
          idle: {
            rss: median(idle.map((sample) => sample.rss)),
            pss: median(idle.map((sample) => sample.pss)),
          },
        }),
    ...(taken[0]?.confinement === undefined ? {} : { confinement: taken[0].confinement }),
  };
});

const pythonReference = rows[0] as Row;
const ownReference = (runtime: 'python' | 'node'): Row =>
  rows.find((row) => row.reference && row.runtime === runtime) as Row;
const meanLoad = loads.reduce((sum, load) => sum + load, 0) / loads.length;
const mib = (bytes: number): string => (bytes / 1048576).toFixed(1);
console.log(
  `machine: ${cpus().length} × ${cpus()[0]?.model}, Linux ${release()}, Node ${process.version}`,
);
console.log(
  `python: ${python}; ${rounds} rounds of ${sequentialCalls} calls back to back and ${concurrentCalls} at concurrency ${concurrency}, medians over rounds; load average ${meanLoad.toFixed(1)} (${Math.min(...loads).toFixed(1)}–${Math.max(...loads).toFixed(1)})`,
);
console.log(
  '| case | p50 back to back (ms) | p90 (ms) | p50 vs python3 ref | p50 vs own runtime ref | calls/s at 8 | calls/s vs python3 ref | vs own runtime ref | idle RSS / PSS (MiB each) |',
);
console.log('| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |');
for (const row of rows) {
  const own = ownReference(row.runtime);
  const idle = row.idle === undefined ? '—' : `${mib(row.idle.rss)} / ${mib(row.idle.pss)}`;
  console.log(
    `| ${row.name}${row.confinement === undefined ? '' : ` (${row.confinement})`} | ${row.p50.toFixed(1)} | ${row.p90.toFixed(1)} | ${(row.p50 / pythonReference.p50).toFixed(2)}× | ${(row.p50 / own.p50).toFixed(2)}× | ${row.callsPerSecond.toFixed(1)} | ${(row.callsPerSecond / pythonReference.callsPerSecond).toFixed(2)}× | ${(row.callsPerSecond / own.callsPerSecond).toFixed(2)}× | ${idle} |`,
  );
}

// Issue 25's targets, against the python3 reference, for each runtime's confined cases.
const targets = [
  { what: 'p50 back to back ≤ 0.3× the python3 reference', limit: 0.3, below: true },
  { what: 'calls/s at concurrency 8 ≥ 3× the python3 reference', limit: 3, below: false },
];
console.log('\n| target (issue 25) | case | measured | |');
console.log('| --- | --- | ---: | --- |');
for (const row of rows.filter((each) => !each.reference && !each.name.includes('none'))) {
  for (const target of targets) {
    const ratio = target.below
      ? row.p50 / pythonReference.p50
      : row.callsPerSecond / pythonReference.callsPerSecond;
    const met = target.below ? ratio <= target.limit : ratio >= target.limit;
    console.log(
      `| ${target.what} | ${row.name} | ${ratio.toFixed(2)}× | ${met ? 'met' : '**not met**'} |`,
    );
  }
}
