// What surviving a co-tenant's worker death costs at concurrency 8, in one run, rounds
// interleaved: this build (each execution journals what the host gives it, for a replay) next to
// another build of the package given by BASELINE_SRC (its src/index.ts, e.g. the commit before
// the journal), and next to a proxy of the alternative the issue allows — one execution per
// worker process — modelled as this build with at most `workers` executions in flight.
// Workloads: a trivial snippet, one data request (answered at once, or after 20 ms), and ten
// status events.
// Run: node --no-node-snapshot --conditions=@coda/source bench/co-tenant-replay.ts
import { loadavg } from 'node:os';
import { SandboxEngine } from '../src/index.ts';

interface Engine {
  ready(): Promise<void>;
  run(request: { code: string }): Promise<{ type: string }>;
  dispose(): Promise<void>;
}
type EngineClass = new (config: object) => Engine;

const workers = 2;
const total = Number(process.env.BENCH_TOTAL ?? 600);
const rounds = Number(process.env.BENCH_ROUNDS ?? 5);
const workloads = [
  { name: 'trivial', code: 'return 1 + 2' },
  { name: 'one data request', code: 'return await dataProxy.request({ q: 1 })' },
  // A handler doing I/O: where one execution per worker would leave the workers idle.
  {
    name: 'one data request answered after 20 ms',
    code: 'return await dataProxy.request({ delayMs: 20 })',
  },
  {
    name: 'ten status events',
    code: 'for (let i = 0; i < 10; i++) reportStatus("step " + i); return 1',
  },
] as const;

const config = {
  workers,
  maxConcurrent: 16,
  dataHandler: async (params: unknown) => {
    const delayMs = (params as { delayMs?: number }).delayMs;
    if (delayMs !== undefined) await new Promise((resolve) => setTimeout(resolve, delayMs));
    return { ok: 1 };
  },
};

/** Executions per second of `total` runs of `code` by 8 callers, at most `inFlight` at once. */
async function throughput(engine: Engine, code: string, inFlight: number): Promise<number> {
  let next = 0;
  let running = 0;
  const waiters: (() => void)[] = [];
  const started = performance.now();
  await Promise.all(
    Array.from({ length: 8 }, async () => {
      while (next < total) {
        next++;
        while (running >= inFlight) await new Promise<void>((resolve) => waiters.push(resolve));
        running++;
        const event = await engine.run({ code });
        running--;
        waiters.shift()?.();
        if (event.type !== 'result') throw new Error(`not a result: ${JSON.stringify(event)}`);
      }
    }),
  );
  return (total * 1_000) / (performance.now() - started);
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? 0;
}

const variants: { name: string; engine: Engine; inFlight: number }[] = [
  { name: 'this build (journal)', engine: new SandboxEngine(config), inFlight: 8 },
];
const baseline = process.env.BASELINE_SRC;
if (baseline !== undefined) {
  const module = (await import(baseline)) as { SandboxEngine: EngineClass };
  variants.push({ name: 'baseline build', engine: new module.SandboxEngine(config), inFlight: 8 });
}
variants.push({
  name: `one execution per worker (proxy: ${workers} in flight)`,
  engine: new SandboxEngine(config),
  inFlight: workers,
});
for (const variant of variants) await variant.engine.ready();

const results = new Map<string, number[]>();
const load = [loadavg()[0] ?? 0];
for (let round = 0; round < rounds; round++) {
  for (const workload of workloads) {
    for (const variant of variants) {
      const key = `${workload.name}|${variant.name}`;
      const value = await throughput(variant.engine, workload.code, variant.inFlight);
      results.set(key, [...(results.get(key) ?? []), value]);
    }
  }
  load.push(loadavg()[0] ?? 0);
}
for (const variant of variants) await variant.engine.dispose();

console.log(
  `### Co-tenant replay: ${total} executions at concurrency 8, ${workers} workers, median of ${rounds} rounds (load ${load.map((l) => l.toFixed(1)).join(' → ')})`,
);
console.log('');
const reference = variants.find((variant) => variant.name === 'baseline build') ?? variants[0]!;
console.log(`| workload | variant | executions/s [min–max] | vs ${reference.name} |`);
console.log('| --- | --- | --- | --- |');
for (const workload of workloads) {
  const base = median(results.get(`${workload.name}|${reference.name}`) ?? []);
  for (const variant of variants) {
    const values = results.get(`${workload.name}|${variant.name}`) ?? [];
    const value = median(values);
    const range = `${Math.min(...values).toFixed(0)}–${Math.max(...values).toFixed(0)}`;
    console.log(
      `| ${workload.name} | ${variant.name} | ${value.toFixed(0)} [${range}] | ${(value / base).toFixed(2)}× |`,
    );
  }
}
