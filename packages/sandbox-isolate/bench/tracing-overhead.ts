// The cost of OpenTelemetry: the same executions on an engine whose spans and metrics go to a real
// SDK (batched to an exporter that drops them, as a production exporter sends them elsewhere)
// and on one with no SDK registered (the API's no-op, what an application without OpenTelemetry
// gets), interleaved in rounds. Run by bench/run.ts, or alone:
// node --no-node-snapshot --conditions=@coda/source bench/tracing-overhead.ts

import { defaultExecutionLimits, type TerminalEvent } from '@coda/sandbox-core';
import { MeterProvider, MetricReader } from '@opentelemetry/sdk-metrics';
import {
  BasicTracerProvider,
  BatchSpanProcessor,
  type SpanExporter,
} from '@opentelemetry/sdk-trace-base';
import { Bench } from 'tinybench';
import { SandboxEngine } from '../src/index.ts';
import type { JobHost } from '../src/isolate/job.ts';
import { EngineTelemetry } from '../src/telemetry/engine-telemetry.ts';

const quick = process.env.BENCH_QUICK === '1';

/** Takes every batch and drops it: the SDK's work is measured, not a network's. */
const droppingExporter: SpanExporter = {
  export(_spans, done) {
    done({ code: 0 });
  },
  shutdown: async () => {},
};

/** A pull reader nobody pulls: instruments aggregate as they would under a real reader. */
class IdleReader extends MetricReader {
  protected override async onForceFlush(): Promise<void> {}
  protected override async onShutdown(): Promise<void> {}
}

const workloads = [
  ['trivial (`return 1 + 2`)', 'return 1 + 2'],
  [
    '5 data requests',
    'let n = 0; for (let i = 0; i < 5; i++) n += (await dataProxy.request({ i })).i; return n',
  ],
] as const;

/** Markdown lines: latency and host CPU per execution, tracing off and on, per mode and workload. */
export async function tracingOverhead(): Promise<string[]> {
  const tracerProvider = new BasicTracerProvider({
    spanProcessors: [new BatchSpanProcessor(droppingExporter)],
  });
  const meterProvider = new MeterProvider({ readers: [new IdleReader()] });
  const dataHandler = (params: unknown) => params;
  // A second engine without an SDK shows what two engines differ by with nothing between them.
  const variants = ['no SDK', 'no SDK (a second engine: noise)', 'SDK'] as const;
  const engines = (['process', 'in-process'] as const).map((isolation) => ({
    isolation,
    engines: [
      new SandboxEngine({ isolation, dataHandler }),
      new SandboxEngine({ isolation, dataHandler }),
      new SandboxEngine({ isolation, dataHandler, telemetry: { tracerProvider, meterProvider } }),
    ],
  }));
  await Promise.all(engines.flatMap((mode) => mode.engines.map((engine) => engine.ready())));
  const rounds = quick ? 4 : 12;
  const batch = quick ? 25 : 50;
  // Per variant: every latency, and the host's CPU time per execution of each batch.
  const figures = new Map<string, { latency: number[]; cpu: number[] }>();
  for (const { isolation, engines: trio } of engines) {
    for (const [label, code] of workloads) {
      for (let round = 0; round < rounds; round++) {
        // Batches in a rotating order, so that load changes over the run hit every variant.
        for (let turn = 0; turn < trio.length; turn++) {
          const index = (round + turn) % trio.length;
          const engine = trio[index]!;
          const key = `${isolation}|${label}|${index}`;
          const figure = figures.get(key) ?? { latency: [], cpu: [] };
          figures.set(key, figure);
          const cpuBefore = process.cpuUsage();
          for (let i = 0; i < batch; i++) {
            const started = performance.now();
            const event = await engine.run({ code });
            if (event.type !== 'result') throw new Error(`${event.code}: ${event.message}`);
            if (round > 0) figure.latency.push(performance.now() - started);
          }
          const cpu = process.cpuUsage(cpuBefore);
          if (round > 0) figure.cpu.push((cpu.user + cpu.system) / batch);
        }
      }
    }
  }
  await Promise.all(engines.flatMap((mode) => mode.engines.map((engine) => engine.dispose())));
  const traceCost = await traceLifecycleCost(tracerProvider, meterProvider);
  await tracerProvider.shutdown();
  await meterProvider.shutdown();
  const lines = [
    `#### (g) OpenTelemetry: no SDK registered vs spans and metrics to an SDK (${rounds - 1} rounds of ${batch} sequential executions per variant, after a warm-up round)`,
    '',
    '| isolation | workload | variant | latency p50 | vs no SDK | host CPU per execution (median of rounds) | vs no SDK |',
    '| --- | --- | --- | --- | --- | --- | --- |',
  ];
  for (const { isolation } of engines) {
    for (const [label] of workloads) {
      const base = figures.get(`${isolation}|${label}|0`);
      const baseLatency = median(base?.latency ?? []);
      const baseCpu = median(base?.cpu ?? []);
      variants.forEach((variant, index) => {
        const figure = figures.get(`${isolation}|${label}|${index}`);
        const latency = median(figure?.latency ?? []);
        const cpu = median(figure?.cpu ?? []);
        const versus = (value: number, of: number, unit: string, digits: number) =>
          index === 0
            ? '–'
            : `${value >= of ? '+' : ''}${(value - of).toFixed(digits)} ${unit} (${(((value - of) / of) * 100).toFixed(1)} %)`;
        lines.push(
          `| ${isolation} | ${label} | ${variant} | ${latency.toFixed(3)} ms | ${versus(latency, baseLatency, 'ms', 3)} | ${cpu.toFixed(0)} µs | ${versus(cpu, baseCpu, 'µs', 0)} |`,
        );
      });
    }
  }
  lines.push('');
  lines.push(
    `The telemetry's own work, measured without isolates (tinybench, means: one execution's spans and metrics with 5 data requests around a host that answers at once, less the same 5 calls without telemetry): ${traceCost.sdk.toFixed(1)} µs with the SDK, ${traceCost.noop.toFixed(1)} µs with the no-op API.`,
  );
  lines.push('');
  return lines;
}

/**
 * Microseconds of one execution's telemetry (execution span, three phases, 5 data request spans,
 * metrics) with the SDK and with the no-op API, around a host that answers at once.
 */
async function traceLifecycleCost(
  tracerProvider: BasicTracerProvider,
  meterProvider: MeterProvider,
): Promise<{ sdk: number; noop: number }> {
  // Differences with the bare calls, so only the telemetry's share remains.
  const host: JobHost = {
    status: () => {},
    data: async () => ({ ok: true, json: '1' }),
  };
  const event: TerminalEvent = {
    type: 'result',
    payload: 1,
    stats: {
      wallMs: 1,
      cpuMs: 1,
      heapUsedBytes: 1,
      dataRequests: 5,
      dataBytes: 10,
      statusEvents: 0,
      statusDropped: 0,
      statusBytes: 0,
      resultBytes: 1,
    },
  };
  const lifecycle = async (telemetry: EngineTelemetry) => {
    const trace = telemetry.start('bench');
    trace.request(defaultExecutionLimits, 'javascript');
    trace.admission(0, 8, 0);
    trace.enter('queue');
    const traced = trace.host(host, () => false);
    traced.dispatched?.();
    for (let i = 0; i < 5; i++) await traced.data('{}', 2, '');
    trace.end(event);
  };
  const sdk = EngineTelemetry.create({ tracerProvider, meterProvider }, 'in-process');
  const noop = EngineTelemetry.create(undefined, 'in-process');
  if (sdk === undefined || noop === undefined) throw new Error('@opentelemetry/api is missing');
  const bench = new Bench({ time: quick ? 300 : 1_000, warmupTime: 200 });
  bench.add('sdk', () => lifecycle(sdk));
  bench.add('noop', () => lifecycle(noop));
  // The same five calls with no telemetry at all: what the two above are compared with.
  bench.add('none', async () => {
    for (let i = 0; i < 5; i++) await host.data('{}', 2, '');
  });
  await bench.run();
  const mean = (name: string) => {
    const result = bench.getTask(name)?.result;
    return result !== undefined && 'latency' in result ? result.latency.mean * 1_000 : Number.NaN;
  };
  const none = mean('none');
  return { sdk: mean('sdk') - none, noop: mean('noop') - none };
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? Number.NaN;
}

if (import.meta.main) {
  for (const line of await tracingOverhead()) console.log(line);
}
