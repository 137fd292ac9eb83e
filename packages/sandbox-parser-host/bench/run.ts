// `pnpm bench`: p50 round trip of a small payload through the parser host, against the seed's
// Python design (a python3 child with RLIMIT_AS/RLIMIT_CPU, JSON over stdin/stdout) in the
// same run. The cases are interleaved in short rounds so that load from other work on the
// machine falls on all of them alike. Prints the table that docs/performance.md records.
import { cpus, loadavg, release } from 'node:os';
import { fileURLToPath } from 'node:url';
import { Bench } from 'tinybench';
import type { ParserHost } from '../src/index.ts';
import { python, runReference } from './reference-host.ts';

// The built package, as users run it: its runner is plain JavaScript (from src/, Node would
// strip types from the runner on every start, which costs a cold child tens of milliseconds).
const distEntry = new URL('../dist/index.js', import.meta.url).href;
const { createParserHost } = (await import(distEntry)) as typeof import('../src/index.ts');

const module = fileURLToPath(new URL('./fixtures/parsers.mjs', import.meta.url));
const payload = {
  feed: 'telemetry',
  frames: [
    { t: 1_700_000_000, values: [1.5, 2.25, 3] },
    { t: 1_700_000_001, values: [4, 5.5, 6.75] },
  ],
  tags: { site: 'north', unit: 'kPa' },
};
const rounds = Number(process.env.BENCH_ROUNDS ?? 10);
const perRound = Number(process.env.BENCH_ITERATIONS ?? 5);

function expectOk(result: { ok: boolean; error?: string }): void {
  if (!result.ok) throw new Error(`benchmark call failed: ${result.error}`);
}

const plainCold = createParserHost({ module, confinement: 'none', warmSpare: false });
const confinedCold = createParserHost({ module, warmSpare: false });
const confinedWarm = createParserHost({ module, warmSpare: true });
const hosts: ParserHost[] = [plainCold, confinedCold, confinedWarm];

const cases: Array<{ name: string; fn: () => Promise<void>; beforeEach?: () => Promise<void> }> = [
  {
    name: 'python3 reference (seed 004: RLIMIT_AS + RLIMIT_CPU, JSON over stdio)',
    fn: async () => expectOk((await runReference('echo', payload)) as { ok: boolean }),
  },
  {
    name: 'parser-host cold: rlimits + permission model, no bubblewrap',
    fn: async () => expectOk(await plainCold.runParser('echo', payload)),
  },
  {
    name: 'parser-host cold: fully confined (bubblewrap, cgroup, seccomp)',
    fn: async () => expectOk(await confinedCold.runParser('echo', payload)),
  },
  {
    name: 'parser-host warm spare: fully confined',
    fn: async () => expectOk(await confinedWarm.runParser('echo', payload)),
    // The spare is replaced after each call; wait (untimed) until the next one is ready.
    beforeEach: () => confinedWarm.warm(),
  },
];

const samples = cases.map(() => [] as number[]);
const loads: number[] = [];
for (let round = 0; round < rounds; round++) {
  const bench = new Bench({
    iterations: perRound,
    time: 0,
    warmupIterations: round === 0 ? 2 : 0,
    warmupTime: 0,
    retainSamples: true,
  });
  for (const { name, fn, beforeEach } of cases) {
    bench.add(name, fn, beforeEach === undefined ? {} : { beforeEach });
  }
  await bench.run();
  bench.tasks.forEach((task, index) => {
    const result = task.result;
    if (result === undefined || !('latency' in result)) throw new Error(`${task.name} failed`);
    samples[index]?.push(...(result.latency.samples ?? []));
  });
  loads.push(loadavg()[0] ?? 0);
}
await Promise.all(hosts.map((host) => host.close()));

function percentile(values: number[], fraction: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  const at = (sorted.length - 1) * fraction;
  const low = Math.floor(at);
  const high = Math.ceil(at);
  return (sorted[low] ?? 0) + ((sorted[high] ?? 0) - (sorted[low] ?? 0)) * (at - low);
}

const p50s = samples.map((values) => percentile(values, 0.5));
const reference = p50s[0] ?? 1;
const confinement = confinedCold.confinement;
const meanLoad = loads.reduce((sum, load) => sum + load, 0) / loads.length;
console.log(
  `machine: ${cpus().length} × ${cpus()[0]?.model}, Linux ${release()}, Node ${process.version}`,
);
console.log(
  `reference: ${python}; ${rounds} rounds × ${perRound} calls per case; load average ${meanLoad.toFixed(1)}`,
);
console.log(`confined children: ${confinement?.sandbox}, memory via ${confinement?.memory}`);
console.log('| case | p50 (ms) | p90 (ms) | p50 vs python3 reference |');
console.log('| --- | ---: | ---: | ---: |');
cases.forEach(({ name }, index) => {
  const p50 = p50s[index] ?? 0;
  const p90 = percentile(samples[index] ?? [], 0.9);
  console.log(
    `| ${name} | ${p50.toFixed(1)} | ${p90.toFixed(1)} | ${(p50 / reference).toFixed(2)}× |`,
  );
});
