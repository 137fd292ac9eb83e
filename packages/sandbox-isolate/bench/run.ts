// Benchmarks of the engine against raw isolated-vm on the same machine, in one run:
// (a) sequential latency, (b) throughput at concurrency 8, (c) a CPU-bound snippet,
// (d) host RSS after 10 000 executions vs after 100. Prints a Markdown report.
import { availableParallelism, cpus, totalmem } from 'node:os';
import ivm from 'isolated-vm';
import { Bench } from 'tinybench';
import { SandboxEngine } from '../src/index.ts';

const trivialUser = 'return 1 + 2';
const cpuUser = 'let x = 0; for (let i = 0; i < 7e5; i++) x = (x + i * i) % 1000003; return x';
const quick = process.env.BENCH_QUICK === '1';

/** The raw cycle: new Isolate + createContext + eval (as an async function) + dispose. */
async function rawCycle(body: string): Promise<unknown> {
  const isolate = new ivm.Isolate({ memoryLimit: 256 });
  try {
    const context = await isolate.createContext();
    return await context.eval(`(async () => { ${body} })()`, { promise: true, timeout: 30_000 });
  } finally {
    isolate.dispose();
  }
}

async function engineRun(engine: SandboxEngine, code: string): Promise<unknown> {
  const event = await engine.run({ code });
  if (event.type !== 'result') throw new Error(`${event.code}: ${event.message}`);
  return event.payload;
}

function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? 0;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** p50 of `count` sequential calls with `gapMs` idle between them. */
async function sequentialP50(fn: () => Promise<unknown>, count: number, gapMs: number) {
  const samples: number[] = [];
  for (let i = 0; i < count; i++) {
    const started = performance.now();
    await fn();
    samples.push(performance.now() - started);
    if (gapMs > 0) await sleep(gapMs);
  }
  return { p50: percentile(samples, 50), p99: percentile(samples, 99) };
}

/** Operations per second of `total` calls with at most `concurrency` in flight. */
async function throughput(fn: () => Promise<unknown>, total: number, concurrency: number) {
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < total) {
        next++;
        await fn();
      }
    }),
  );
  return (total * 1_000) / (performance.now() - started);
}

const fmt = (n: number, digits = 2) => n.toFixed(digits);
const ratio = (a: number, b: number) => `${fmt(a / b)}×`;
const rssMb = () => process.memoryUsage.rss() / 1_048_576;

async function main(): Promise<void> {
  const engine = new SandboxEngine({ maxConcurrent: 16 });
  const inProcess = new SandboxEngine({ isolation: 'in-process', maxConcurrent: 16 });
  await Promise.all([engine.ready(), inProcess.ready()]);
  const lines: string[] = [];
  const log = (line: string) => {
    lines.push(line);
    console.log(line);
  };

  // (a) sequential latency, measured by tinybench back to back, and with 5 ms between requests
  // (a request stream, as an agent makes them, lets the warm pool refill).
  const iterations = quick ? 100 : 500;
  const bench = new Bench({ iterations, warmupIterations: 50, time: 0, warmupTime: 0 });
  bench
    .add('raw isolated-vm cycle', () => rawCycle(trivialUser))
    .add('engine, process (default)', () => engineRun(engine, trivialUser))
    .add('engine, in-process', () => engineRun(inProcess, trivialUser));
  await bench.run();
  const p50 = (name: string) => {
    const result = bench.getTask(name)?.result;
    return result !== undefined && 'latency' in result ? result.latency.p50 : Number.NaN;
  };
  const raw = p50('raw isolated-vm cycle');
  const gapped = {
    raw: await sequentialP50(() => rawCycle(trivialUser), iterations, 5),
    process: await sequentialP50(() => engineRun(engine, trivialUser), iterations, 5),
    inProcess: await sequentialP50(() => engineRun(inProcess, trivialUser), iterations, 5),
  };
  log('### (a) Sequential latency of a trivial execution (`return 1 + 2`)');
  log('');
  log('| variant | p50 back to back | vs raw | p50 with 5 ms between requests | vs raw |');
  log('| --- | --- | --- | --- | --- |');
  log(`| raw isolated-vm cycle | ${fmt(raw)} ms | 1.00× | ${fmt(gapped.raw.p50)} ms | 1.00× |`);
  log(
    `| engine, process (default) | ${fmt(p50('engine, process (default)'))} ms | ${ratio(p50('engine, process (default)'), raw)} | ${fmt(gapped.process.p50)} ms | ${ratio(gapped.process.p50, gapped.raw.p50)} |`,
  );
  log(
    `| engine, in-process | ${fmt(p50('engine, in-process'))} ms | ${ratio(p50('engine, in-process'), raw)} | ${fmt(gapped.inProcess.p50)} ms | ${ratio(gapped.inProcess.p50, gapped.raw.p50)} |`,
  );
  log('');

  // (b) throughput at concurrency 8.
  const total = quick ? 300 : 1_000;
  const rawOps = await throughput(() => rawCycle(trivialUser), total, 8);
  const engineOps = await throughput(() => engineRun(engine, trivialUser), total, 8);
  const inProcessOps = await throughput(() => engineRun(inProcess, trivialUser), total, 8);
  log(`### (b) Throughput, ${total} trivial executions at concurrency 8`);
  log('');
  log('| variant | executions/s | vs raw |');
  log('| --- | --- | --- |');
  log(`| raw isolated-vm cycles | ${fmt(rawOps, 0)} | 1.00× |`);
  log(`| engine, process (default) | ${fmt(engineOps, 0)} | ${ratio(engineOps, rawOps)} |`);
  log(`| engine, in-process | ${fmt(inProcessOps, 0)} | ${ratio(inProcessOps, rawOps)} |`);
  log('');

  // (c) a CPU-bound snippet, interleaved so drift hits both alike.
  const rounds = quick ? 10 : 30;
  const cpu = { raw: [] as number[], process: [] as number[], inProcess: [] as number[] };
  for (let i = 0; i < rounds; i++) {
    for (const [key, fn] of [
      ['raw', () => rawCycle(cpuUser)],
      ['process', () => engineRun(engine, cpuUser)],
      ['inProcess', () => engineRun(inProcess, cpuUser)],
    ] as const) {
      const started = performance.now();
      await fn();
      cpu[key].push(performance.now() - started);
    }
  }
  const cpuRaw = percentile(cpu.raw, 50);
  log(`### (c) CPU-bound snippet (${rounds} rounds, p50)`);
  log('');
  log('| variant | p50 | vs raw |');
  log('| --- | --- | --- |');
  log(`| raw isolated-vm | ${fmt(cpuRaw, 1)} ms | 1.00× |`);
  log(
    `| engine, process (default) | ${fmt(percentile(cpu.process, 50), 1)} ms | ${ratio(percentile(cpu.process, 50), cpuRaw)} |`,
  );
  log(
    `| engine, in-process | ${fmt(percentile(cpu.inProcess, 50), 1)} ms | ${ratio(percentile(cpu.inProcess, 50), cpuRaw)} |`,
  );
  log('');

  // (d) host RSS after 100 executions vs after 10 000, on a fresh engine.
  const fresh = new SandboxEngine({ maxConcurrent: 16 });
  await fresh.ready();
  const count = quick ? 2_000 : 10_000;
  await throughput(() => engineRun(fresh, trivialUser), 100, 8);
  global.gc?.();
  const after100 = rssMb();
  await throughput(() => engineRun(fresh, trivialUser), count - 100, 8);
  global.gc?.();
  await sleep(200);
  const afterAll = rssMb();
  await fresh.dispose();
  log(`### (d) Host RSS, process mode`);
  log('');
  log('| after 100 executions | after ' + count + ' executions | growth |');
  log('| --- | --- | --- |');
  log(`| ${fmt(after100, 1)} MiB | ${fmt(afterAll, 1)} MiB | ${fmt(afterAll - after100, 1)} MiB |`);
  log('');
  const cpu0 = cpus()[0];
  log(
    `Machine: ${cpu0?.model ?? 'unknown CPU'}, ${availableParallelism()} cores, ${fmt(totalmem() / 1_073_741_824, 0)} GiB, Node ${process.version}, isolated-vm 7, ${new Date().toISOString().slice(0, 10)}.`,
  );
  await Promise.all([engine.dispose(), inProcess.dispose()]);
}

await main();
