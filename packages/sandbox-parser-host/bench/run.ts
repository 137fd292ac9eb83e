// `pnpm bench`: the parser host under back-to-back load, both runtimes, against the seed's
// Python design (a fresh python3 per call with RLIMIT_AS/RLIMIT_CPU, JSON over stdin/stdout,
// doing the same parse) in the same run:
//
// - back to back at concurrency 1: each call starts when the previous one has its result; p50
//   and p90 of the call's round trip;
// - concurrency 8: 8 calls in flight at all times; calls per second over the whole run;
// - the resident memory of the idle warm spares (every process a host keeps waiting, bwrap's
//   included), read from /proc after `warm()`.
//
// Prints the tables that docs/performance.md records.
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
const sequentialCalls = Number(process.env.BENCH_CALLS ?? 60);
const concurrentCalls = Number(process.env.BENCH_CONCURRENT_CALLS ?? 120);
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

/** Resident memory of every process this one started, summed. */
function childrenResidentBytes(): number {
  return descendants(process.pid).reduce((sum, pid) => {
    try {
      const match = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'latin1'));
      return sum + (match === null ? 0 : Number(match[1]) * 1024);
    } catch {
      return sum;
    }
  }, 0);
}

interface Row {
  name: string;
  p50: number;
  p90: number;
  callsPerSecond: number;
  idleSpareBytes?: number;
  confinement?: string;
}

async function measureReference(): Promise<Row> {
  const call: Call = async () => (await runReference('flatten', payload)) as { ok: boolean };
  await backToBack(call); // warm the page cache
  const latencies = await backToBack(call);
  return {
    name: 'python3 reference (seed 004: fresh python3 per call)',
    p50: percentile(latencies, 0.5),
    p90: percentile(latencies, 0.9),
    callsPerSecond: await throughput(call),
  };
}

async function measureHost(name: string, options: ParserHostOptions): Promise<Row> {
  const baseline = childrenResidentBytes();
  const host: ParserHost = createParserHost({ maxConcurrent: concurrency, ...options });
  try {
    await host.warm();
    const idle = host.settings.spares > 0 ? childrenResidentBytes() - baseline : undefined;
    const call: Call = () => host.runParser('flatten', payload);
    expectOk(await call());
    await host.warm();
    const latencies = await backToBack(call);
    await host.warm();
    const callsPerSecond = await throughput(call);
    const report = host.confinement;
    return {
      name,
      p50: percentile(latencies, 0.5),
      p90: percentile(latencies, 0.9),
      callsPerSecond,
      ...(idle === undefined ? {} : { idleSpareBytes: idle / host.settings.spares }),
      confinement: `${report?.sandbox}, memory via ${report?.memory}`,
    };
  } finally {
    await host.close();
  }
}

const loads: number[] = [loadavg()[0] ?? 0];
const rows: Row[] = [await measureReference()];
const cases: [string, ParserHostOptions][] = [
  [`node, confined, ${spares} spares`, { module: nodeModule, spares }],
  [`python, confined, ${spares} spares`, { module: pythonModule, python, spares }],
  ['node, confined, no spare', { module: nodeModule, warmSpare: false }],
  ['python, confined, no spare', { module: pythonModule, python, warmSpare: false }],
  [
    `python, confinement none, ${spares} spares`,
    { module: pythonModule, python, spares, confinement: 'none' },
  ],
];
for (const [name, options] of cases) {
  rows.push(await measureHost(name, options));
  loads.push(loadavg()[0] ?? 0);
}
rows.push({ ...(await measureReference()), name: 'python3 reference, again (drift check)' });
loads.push(loadavg()[0] ?? 0);

const reference = rows[0] as Row;
const meanLoad = loads.reduce((sum, load) => sum + load, 0) / loads.length;
console.log(
  `machine: ${cpus().length} × ${cpus()[0]?.model}, Linux ${release()}, Node ${process.version}`,
);
console.log(
  `python: ${python}; ${sequentialCalls} calls back to back, ${concurrentCalls} calls at concurrency ${concurrency}; load average ${meanLoad.toFixed(1)}`,
);
console.log(
  '| case | p50 back to back (ms) | p90 (ms) | p50 vs reference | calls/s at 8 | calls/s vs reference | idle spare RSS (MiB each) |',
);
console.log('| --- | ---: | ---: | ---: | ---: | ---: | ---: |');
for (const row of rows) {
  const spare = row.idleSpareBytes === undefined ? '—' : (row.idleSpareBytes / 1048576).toFixed(1);
  console.log(
    `| ${row.name}${row.confinement === undefined ? '' : ` (${row.confinement})`} | ${row.p50.toFixed(1)} | ${row.p90.toFixed(1)} | ${(row.p50 / reference.p50).toFixed(2)}× | ${row.callsPerSecond.toFixed(1)} | ${(row.callsPerSecond / reference.callsPerSecond).toFixed(2)}× | ${spare} |`,
  );
}
