// OpenTelemetry on real isolates: the spans of an execution (names, parents, attributes, status)
// for a success with data requests and tool calls, a timeout, refused admissions and a
// cancellation, and the metrics, read back through the SDK's in-memory exporters. The engine
// picks up the providers registered globally, as an application's SDK registers them; a second
// engine gets its own through the `telemetry` option. Without `@opentelemetry/api` installed the
// engine works and records nothing (a child process in which the API cannot be resolved).
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import {
  type ExecutionLimits,
  type ExecutionStats,
  SandboxRateLimitedError,
} from '@coda/sandbox-core';
import { context, metrics, SpanStatusCode, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import {
  AggregationTemporality,
  type DataPoint,
  type Histogram,
  InMemoryMetricExporter,
  MeterProvider,
  PeriodicExportingMetricReader,
} from '@opentelemetry/sdk-metrics';
import {
  AlwaysOffSampler,
  BasicTracerProvider,
  InMemorySpanExporter,
  type ReadableSpan,
  type Sampler,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import { afterAll, beforeEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineTool, SandboxEngine } from '../src/index.ts';
import { expectError, expectResult } from './helpers.ts';

/** Spans, metrics and the providers that feed them. */
function telemetrySink(sampler?: Sampler) {
  const spans = new InMemorySpanExporter();
  const tracerProvider = new BasicTracerProvider({
    spanProcessors: [new SimpleSpanProcessor(spans)],
    ...(sampler === undefined ? {} : { sampler }),
  });
  const exporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
  const reader = new PeriodicExportingMetricReader({ exporter, exportIntervalMillis: 3_600_000 });
  const meterProvider = new MeterProvider({ readers: [reader] });
  /** The latest data points of the metric `name`. */
  const points = async (name: string) => {
    exporter.reset();
    await reader.forceFlush();
    const all = exporter
      .getMetrics()
      .flatMap((resource) => resource.scopeMetrics.flatMap((scope) => scope.metrics));
    return all
      .filter((metric) => metric.descriptor.name === name)
      .flatMap((metric): DataPoint<unknown>[] => metric.dataPoints);
  };
  return { spans, tracerProvider, meterProvider, points };
}

const global = telemetrySink();
trace.setGlobalTracerProvider(global.tracerProvider);
metrics.setGlobalMeterProvider(global.meterProvider);
context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());

/** A span and its children, as the test compares them. */
interface SpanTree {
  name: string;
  status: { code: SpanStatusCode; message?: string };
  attributes: Record<string, unknown>;
  children: SpanTree[];
}

/** The spans of one trace as a tree, children in start order, from the root (no parent here). */
function tree(spans: readonly ReadableSpan[], root: ReadableSpan): SpanTree {
  const id = root.spanContext().spanId;
  const children = spans
    .filter((span) => span.parentSpanContext?.spanId === id)
    .sort((a, b) => a.startTime[0] - b.startTime[0] || a.startTime[1] - b.startTime[1]);
  return {
    name: root.name,
    status: root.status,
    attributes: { ...root.attributes },
    children: children.map((child) => tree(spans, child)),
  };
}

/** The finished spans of the execution `executionId`, as a tree. */
function executionTree(exporter: InMemorySpanExporter, executionId: string): SpanTree {
  const spans = exporter.getFinishedSpans();
  const root = spans.find(
    (span) =>
      span.name === 'coda.sandbox.execution' &&
      span.attributes['coda.sandbox.execution.id'] === executionId,
  );
  if (root === undefined) throw new Error(`no execution span for ${executionId}`);
  const trace = spans.filter((span) => span.spanContext().traceId === root.spanContext().traceId);
  return tree(trace, root);
}

// Written out, not derived: these names are documented in docs/isolate.md.
const limitNames: Record<keyof ExecutionLimits, string> = {
  memoryMb: 'coda.sandbox.limits.memory_mb',
  timeoutMs: 'coda.sandbox.limits.timeout_ms',
  maxCodeBytes: 'coda.sandbox.limits.max_code_bytes',
  maxTimers: 'coda.sandbox.limits.max_timers',
  maxDataRequests: 'coda.sandbox.limits.max_data_requests',
  maxDataBytes: 'coda.sandbox.limits.max_data_bytes',
  maxRequestBytes: 'coda.sandbox.limits.max_request_bytes',
  maxRequestValues: 'coda.sandbox.limits.max_request_values',
  maxResultBytes: 'coda.sandbox.limits.max_result_bytes',
  maxStatusEvents: 'coda.sandbox.limits.max_status_events',
  maxConsoleCalls: 'coda.sandbox.limits.max_console_calls',
  maxStatusBytes: 'coda.sandbox.limits.max_status_bytes',
};
const statNames: Record<keyof ExecutionStats, string> = {
  wallMs: 'coda.sandbox.stats.wall_ms',
  cpuMs: 'coda.sandbox.stats.cpu_ms',
  heapUsedBytes: 'coda.sandbox.stats.heap_used_bytes',
  dataRequests: 'coda.sandbox.stats.data_requests',
  dataBytes: 'coda.sandbox.stats.data_bytes',
  statusEvents: 'coda.sandbox.stats.status_events',
  statusDropped: 'coda.sandbox.stats.status_dropped',
  statusBytes: 'coda.sandbox.stats.status_bytes',
  resultBytes: 'coda.sandbox.stats.result_bytes',
};

function named<Key extends string>(
  values: Readonly<Record<Key, number>>,
  names: Record<Key, string>,
): Record<string, number> {
  return Object.fromEntries(
    Object.entries(values).map(([field, value]) => {
      const name = names[field as Key];
      if (name === undefined) throw new Error(`${field} has no documented attribute`);
      return [name, value as number];
    }),
  );
}

const unset = { code: SpanStatusCode.UNSET };
const failed = (message: string) => ({ code: SpanStatusCode.ERROR, message });

describe('spans and metrics of executions (process isolation, global providers)', () => {
  const tracer = trace.getTracer('telemetry.test');
  const refusing = {
    name: 'per-user-rate',
    // The guard's own span (a Redis call, say): a child of the admission span.
    acquire: async () =>
      tracer.startActiveSpan('ratelimit.check', (span) => {
        span.end();
        throw new SandboxRateLimitedError('user u1 is over 10 executions a minute', {
          retryAfterMs: 1_500,
        });
      }),
  };
  const engine = new SandboxEngine({
    dataHandler: (params) =>
      // The handler's own span: a child of its data request's span.
      tracer.startActiveSpan('db.lookup', (span) => {
        span.end();
        return { n: (params as { n: number }).n * 10 };
      }),
    tools: {
      getOrders: defineTool({
        description: 'Orders of one region.',
        input: z.strictObject({ region: z.enum(['EMEA', 'APAC']) }),
        handler: ({ region }) => [{ id: 1, region }],
      }),
    },
  });
  const guarded = new SandboxEngine({ guards: [refusing] });
  // A cancelled execution keeps its slot until its isolate has stopped: its own engine.
  const single = new SandboxEngine({ maxConcurrent: 1 });
  afterAll(() => Promise.all([engine.dispose(), guarded.dispose(), single.dispose()]));
  beforeEach(() => global.spans.reset());

  it('a success with data requests and tool calls: every phase and call, limits and stats', async () => {
    const event = expectResult(
      await tracer.startActiveSpan('agent.turn', async (turn) => {
        const result = await engine.run({
          code: `
            const a = await dataProxy.request({ n: 1 });
            const b = await dataProxy.request({ n: 2 });
            const orders = await tools.getOrders({ region: 'EMEA' });
            let refused = '';
            try { await tools.getOrders({ region: 'MARS' }); } catch (e) { refused = e.message; }
            return { sum: a.n + b.n, orders: orders.length, refused: refused.length > 0 };`,
          context: { executionId: 'ok-1' },
        });
        turn.end();
        return result;
      }),
    );
    expect(event.payload).toEqual({ sum: 30, orders: 1, refused: true });
    const caller = global.spans.getFinishedSpans().find((span) => span.name === 'agent.turn');
    const root = global.spans
      .getFinishedSpans()
      .find((span) => span.name === 'coda.sandbox.execution');
    // The execution's span is a child of the span active where submit() was called.
    expect(root?.parentSpanContext?.spanId).toBe(caller?.spanContext().spanId);
    expect(executionTree(global.spans, 'ok-1')).toEqual({
      name: 'coda.sandbox.execution',
      status: unset,
      attributes: {
        'coda.sandbox.execution.id': 'ok-1',
        'coda.sandbox.isolation': 'process',
        'coda.sandbox.language': 'javascript',
        'coda.sandbox.outcome': 'result',
        ...named(engine.defaultLimits, limitNames),
        ...named(event.stats, statNames),
      },
      children: [
        {
          name: 'coda.sandbox.admission',
          status: unset,
          attributes: {
            'coda.sandbox.concurrency.active': 0,
            'coda.sandbox.concurrency.max': 8,
            'coda.sandbox.guards': 0,
          },
          children: [],
        },
        { name: 'coda.sandbox.queue', status: unset, attributes: {}, children: [] },
        {
          name: 'coda.sandbox.run',
          status: unset,
          attributes: {},
          children: [
            {
              name: 'coda.sandbox.data_request',
              status: unset,
              attributes: { 'coda.sandbox.data_request.index': 1 },
              children: [{ name: 'db.lookup', status: unset, attributes: {}, children: [] }],
            },
            {
              name: 'coda.sandbox.data_request',
              status: unset,
              attributes: { 'coda.sandbox.data_request.index': 2 },
              children: [{ name: 'db.lookup', status: unset, attributes: {}, children: [] }],
            },
            {
              name: 'coda.sandbox.tool_call',
              status: unset,
              attributes: {
                'coda.sandbox.data_request.index': 3,
                'gen_ai.operation.name': 'execute_tool',
                'gen_ai.tool.name': 'getOrders',
              },
              children: [],
            },
            {
              name: 'coda.sandbox.tool_call',
              // Never the error's message: it echoes the input ("MARS").
              status: failed('rejected'),
              attributes: {
                'coda.sandbox.data_request.index': 4,
                'gen_ai.operation.name': 'execute_tool',
                'gen_ai.tool.name': 'getOrders',
                'error.type': 'rejected',
              },
              children: [],
            },
          ],
        },
      ],
    });
    expect(event.stats).toMatchObject({ dataRequests: 4 });
  });

  it('a timeout: the run span and the execution span fail with TIMEOUT', async () => {
    const event = expectError(
      await engine.run({
        code: 'const forever: boolean = true;\nwhile (forever) {}',
        language: 'typescript',
        limits: { timeoutMs: 150 },
        context: { executionId: 'timeout-1' },
      }),
      'TIMEOUT',
    );
    const status = failed('TIMEOUT');
    expect(executionTree(global.spans, 'timeout-1')).toEqual({
      name: 'coda.sandbox.execution',
      status,
      attributes: {
        'coda.sandbox.execution.id': 'timeout-1',
        'coda.sandbox.isolation': 'process',
        'coda.sandbox.language': 'typescript',
        'coda.sandbox.outcome': 'TIMEOUT',
        'error.type': 'TIMEOUT',
        ...named({ ...engine.defaultLimits, timeoutMs: 150 }, limitNames),
        ...named(event.stats ?? ({} as ExecutionStats), statNames),
      },
      children: [
        expect.objectContaining({ name: 'coda.sandbox.admission', status: unset }),
        expect.objectContaining({ name: 'coda.sandbox.queue', status: unset }),
        {
          name: 'coda.sandbox.run',
          status,
          attributes: { 'error.type': 'TIMEOUT' },
          children: [],
        },
      ],
    });
  });

  it('a cancellation while the code runs: the run span fails with CANCELLED', async () => {
    const handle = engine.submit({
      code: 'reportStatus("started"); await new Promise(() => {})',
      context: { executionId: 'cancel-1' },
    });
    for await (const event of handle) {
      if (event.type === 'status') break;
    }
    handle.cancel('the user moved on');
    expectError(await handle.result, 'CANCELLED');
    const status = failed('CANCELLED');
    const tree = executionTree(global.spans, 'cancel-1');
    expect([tree.status, tree.attributes['coda.sandbox.outcome']]).toEqual([status, 'CANCELLED']);
    expect(tree.children.map((phase) => [phase.name, phase.status])).toEqual([
      ['coda.sandbox.admission', unset],
      ['coda.sandbox.queue', unset],
      ['coda.sandbox.run', status],
    ]);
  });

  it('a guard refuses admission: the admission span fails, nothing queues or runs', async () => {
    const event = expectError(
      await guarded.run({ code: 'return 1', context: { executionId: 'refused-1' } }),
      'RATE_LIMITED',
    );
    expect(event.message).toBe('user u1 is over 10 executions a minute');
    const status = failed('RATE_LIMITED');
    expect(executionTree(global.spans, 'refused-1')).toEqual({
      name: 'coda.sandbox.execution',
      status,
      attributes: {
        'coda.sandbox.execution.id': 'refused-1',
        'coda.sandbox.isolation': 'process',
        'coda.sandbox.language': 'javascript',
        'coda.sandbox.outcome': 'RATE_LIMITED',
        'error.type': 'RATE_LIMITED',
        ...named(guarded.defaultLimits, limitNames),
      },
      children: [
        {
          name: 'coda.sandbox.admission',
          status,
          attributes: {
            'coda.sandbox.concurrency.active': 0,
            'coda.sandbox.concurrency.max': 8,
            'coda.sandbox.guards': 1,
            'error.type': 'RATE_LIMITED',
          },
          children: [{ name: 'ratelimit.check', status: unset, attributes: {}, children: [] }],
        },
      ],
    });
  });

  it('an invalid request: only the execution span, failed with VALIDATION', async () => {
    expectError(
      await engine.run({
        code: 'return 1',
        limits: { timeoutMs: -1 },
        context: { executionId: 'invalid-1' },
      }),
      'VALIDATION',
    );
    expect(executionTree(global.spans, 'invalid-1')).toEqual({
      name: 'coda.sandbox.execution',
      status: failed('VALIDATION'),
      attributes: {
        'coda.sandbox.execution.id': 'invalid-1',
        'coda.sandbox.isolation': 'process',
        'coda.sandbox.outcome': 'VALIDATION',
        'error.type': 'VALIDATION',
      },
      children: [],
    });
  });

  it('the capacity ceiling refuses admission: CAPACITY on the admission span', async () => {
    const running = single.submit({
      code: 'await new Promise(() => {})',
      limits: { timeoutMs: 5_000 },
    });
    expectError(
      await single.run({ code: 'return 1', context: { executionId: 'full-1' } }),
      'CAPACITY',
    );
    running.cancel();
    expectError(await running.result, 'CANCELLED');
    expect(executionTree(global.spans, 'full-1').children).toEqual([
      {
        name: 'coda.sandbox.admission',
        status: failed('CAPACITY'),
        attributes: {
          'coda.sandbox.concurrency.active': 1,
          'coda.sandbox.concurrency.max': 1,
          'coda.sandbox.guards': 0,
          'error.type': 'CAPACITY',
        },
        children: [],
      },
    ]);
  });

  it('a data request that breaks a limit fails its span with the limit error', async () => {
    const event = expectError(
      await engine.run({
        // The answer ({"n":10}, 8 bytes) takes the 7 bytes of params past 12: a limit only the
        // host can see (a breach the isolate sees ends the run before the call crosses).
        code: 'await dataProxy.request({ n: 1 }); return 1',
        limits: { maxDataBytes: 12 },
        context: { executionId: 'over-1' },
      }),
      'LIMIT_EXCEEDED',
    );
    expect(event.details).toEqual({ field: 'maxDataBytes', limit: 12, size: 15 });
    const run = executionTree(global.spans, 'over-1').children[2];
    expect(run?.status).toEqual(failed('LIMIT_EXCEEDED (maxDataBytes)'));
    expect(run?.children.map((call) => [call.name, call.status, call.attributes])).toEqual([
      [
        'coda.sandbox.data_request',
        failed('LIMIT_EXCEEDED (maxDataBytes)'),
        { 'coda.sandbox.data_request.index': 1, 'error.type': 'LIMIT_EXCEEDED' },
      ],
    ]);
  });

  it('counts executions by outcome and records their durations in seconds', async () => {
    const before = await outcomes();
    const walls = [
      expectResult(await engine.run({ code: 'return 1' })).stats.wallMs,
      expectResult(await engine.run({ code: 'return 2' })).stats.wallMs,
    ];
    expectError(await engine.run({ code: 'throw new Error("x")' }), 'RUNTIME');
    expectError(await guarded.run({ code: 'return 1' }), 'RATE_LIMITED');
    const after = await outcomes();
    expect(delta(before.counts, after.counts)).toEqual({ result: 2, RUNTIME: 1, RATE_LIMITED: 1 });
    expect(delta(before.histogramCounts, after.histogramCounts)).toEqual({
      result: 2,
      RUNTIME: 1,
      RATE_LIMITED: 1,
    });
    const [result] = (await global.points('coda.sandbox.execution.duration')).filter(
      (point) => point.attributes['coda.sandbox.outcome'] === 'result',
    ) as DataPoint<Histogram>[];
    expect(result?.attributes).toEqual({
      'coda.sandbox.outcome': 'result',
      'coda.sandbox.isolation': 'process',
    });
    // In seconds: at least the time the two ran in their isolates, plus little host time (in
    // milliseconds the sum would be a thousand times that).
    const ran = (walls[0]! + walls[1]!) / 1_000;
    const recorded = (result?.value.sum ?? 0) - (before.histogramSums.result ?? 0);
    expect(recorded).toBeGreaterThanOrEqual(ran);
    expect(recorded).toBeLessThan(ran + 2);
  });
});

async function outcomes() {
  const counts: Record<string, number> = {};
  for (const point of await global.points('coda.sandbox.executions')) {
    counts[String(point.attributes['coda.sandbox.outcome'])] = point.value as number;
  }
  const histogramCounts: Record<string, number> = {};
  const histogramSums: Record<string, number> = {};
  for (const point of await global.points('coda.sandbox.execution.duration')) {
    const value = point.value as Histogram;
    const outcome = String(point.attributes['coda.sandbox.outcome']);
    histogramCounts[outcome] = value.count;
    histogramSums[outcome] = value.sum ?? 0;
  }
  return { counts, histogramCounts, histogramSums };
}

function delta(before: Record<string, number>, after: Record<string, number>) {
  const changed: Record<string, number> = {};
  for (const [key, value] of Object.entries(after)) {
    const grown = value - (before[key] ?? 0);
    if (grown !== 0) changed[key] = grown;
  }
  return changed;
}

describe('the telemetry option', () => {
  it('sends an engine’s spans and metrics to the providers it names, not the global ones', async () => {
    const own = telemetrySink();
    global.spans.reset();
    const engine = new SandboxEngine({
      isolation: 'in-process',
      telemetry: { tracerProvider: own.tracerProvider, meterProvider: own.meterProvider },
    });
    try {
      expectResult(await engine.run({ code: 'return 1', context: { executionId: 'own-1' } }));
    } finally {
      await engine.dispose();
    }
    expect(global.spans.getFinishedSpans()).toEqual([]);
    const tree = executionTree(own.spans, 'own-1');
    expect([
      tree.attributes['coda.sandbox.isolation'],
      ...tree.children.map((c) => c.name),
    ]).toEqual(['in-process', 'coda.sandbox.admission', 'coda.sandbox.queue', 'coda.sandbox.run']);
    const [count] = await own.points('coda.sandbox.executions');
    expect([count?.attributes, count?.value]).toEqual([
      { 'coda.sandbox.outcome': 'result', 'coda.sandbox.isolation': 'in-process' },
      1,
    ]);
  });

  it('an execution whose span is not sampled gets no child spans; its metrics still count', async () => {
    const own = telemetrySink(new AlwaysOffSampler());
    const engine = new SandboxEngine({
      isolation: 'in-process',
      dataHandler: () => 1,
      telemetry: { tracerProvider: own.tracerProvider, meterProvider: own.meterProvider },
    });
    try {
      expectResult(await engine.run({ code: 'return await dataProxy.request(1)' }));
    } finally {
      await engine.dispose();
    }
    expect(own.spans.getFinishedSpans()).toEqual([]);
    const [count] = await own.points('coda.sandbox.executions');
    expect(count?.value).toBe(1);
  });

  it('refuses providers that are not providers, naming the field', () => {
    expect(() => new SandboxEngine({ telemetry: { tracerProvider: {} } } as never)).toThrow(
      'telemetry.tracerProvider: expected an OpenTelemetry TracerProvider',
    );
  });
});

describe('without @opentelemetry/api installed', () => {
  it('runs code, and refuses telemetry providers it could not use', () => {
    const script = fileURLToPath(new URL('./fixtures/without-otel.ts', import.meta.url));
    const child = spawnSync(
      process.execPath,
      ['--no-node-snapshot', '--conditions=@coda/source', script],
      { encoding: 'utf8', timeout: 30_000 },
    );
    expect(child.stderr).toBe('');
    expect(
      child.stdout
        .trim()
        .split('\n')
        .map((line) => JSON.parse(line)),
    ).toEqual([
      { otelResolvable: false },
      { type: 'result', payload: { data: 2 } },
      {
        refused: 'VALIDATION',
        message: 'Invalid SandboxEngine config: telemetry: @opentelemetry/api is not installed',
      },
    ]);
  });
});
