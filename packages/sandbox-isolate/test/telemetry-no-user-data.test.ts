// Telemetry carries no user data: a marker goes through every field user code controls — what it
// returns, throws, logs and reports, a tool's input (valid and rejected), data request params,
// keys of a refused result, a syntax error, an unhandled rejection, a handler's error that echoes
// its input — and no exported span (name, attributes, status, events) or metric data point holds
// it. Real isolates, both modes, the SDK's in-memory exporters.
import {
  AggregationTemporality,
  InMemoryMetricExporter,
  MeterProvider,
  PeriodicExportingMetricReader,
} from '@opentelemetry/sdk-metrics';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { SandboxEngine } from '../src/index.ts';

const marker = 'MARKER7f3a';

/** Each snippet puts the marker somewhere user code controls; the outcome does not matter. */
const snippets = [
  `return '${marker}'`,
  `return { '${marker}': 1 }`,
  `return { '${marker}': () => 1 }`,
  `throw new Error('${marker}')`,
  `throw { name: '${marker}', message: '${marker}' }`,
  `class ${marker}Error extends Error { name = '${marker}' }; throw new ${marker}Error('${marker}')`,
  `console.log('${marker}'); reportStatus('${marker}', { '${marker}': '${marker}' }); return 1`,
  `await tools.order({ item: '${marker}' }); return 1`,
  `await tools.order({ item: 5, '${marker}': '${marker}' }); return 1`,
  `await tools.order(['${marker}']); return 1`,
  `await tools.echoFail({ note: '${marker}' }); return 1`,
  `await dataProxy.request({ q: '${marker}' }); return 1`,
  `await dataProxy.request('${marker}'.repeat(100)); return 1`,
  `Promise.reject(new Error('${marker}')); await dataProxy.request(1); return 1`,
  `const ${marker} = ; return 1`,
  `${marker}()`,
  `await new Promise((r) => setTimeout(() => { throw new Error('${marker}'); }, 1)); return 1`,
];

describe.each(['process', 'in-process'] as const)(
  'telemetry carries no user data (%s)',
  (isolation) => {
    it('no span or metric holds a marker user code sent through any field', async () => {
      const spans = new InMemorySpanExporter();
      const tracerProvider = new BasicTracerProvider({
        spanProcessors: [new SimpleSpanProcessor(spans)],
      });
      const exporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
      const reader = new PeriodicExportingMetricReader({
        exporter,
        exportIntervalMillis: 3_600_000,
      });
      const meterProvider = new MeterProvider({ readers: [reader] });
      const engine = new SandboxEngine({
        isolation,
        telemetry: { tracerProvider, meterProvider },
        dataHandler: (params) => params,
        tools: {
          order: { input: z.object({ item: z.number() }).strict(), handler: (input) => input },
          echoFail: {
            handler: (input) => {
              throw new Error(`could not handle ${JSON.stringify(input)}`);
            },
          },
        },
      });
      try {
        const events = await Promise.all(
          snippets.map((code, index) =>
            engine.run({
              code,
              limits: { maxRequestBytes: 200 },
              context: { executionId: `m${index}` },
            }),
          ),
        );
        // The marker did reach the caller: the scan below would find it if telemetry copied it.
        expect(JSON.stringify(events)).toContain(marker);
      } finally {
        await engine.dispose();
      }
      await reader.forceFlush();
      const exported = spans.getFinishedSpans().map((span) => ({
        name: span.name,
        attributes: span.attributes,
        status: span.status,
        events: span.events.map((event) => [event.name, event.attributes]),
        links: span.links.map((link) => link.attributes),
      }));
      expect(exported.length).toBeGreaterThanOrEqual(snippets.length * 3);
      const points = exporter
        .getMetrics()
        .flatMap((resource) => resource.scopeMetrics.flatMap((scope) => scope.metrics))
        .map((metric) => ({ descriptor: metric.descriptor, points: metric.dataPoints }));
      expect(points.length).toBeGreaterThan(0);
      expect(JSON.stringify(exported)).not.toContain(marker);
      expect(JSON.stringify(points)).not.toContain(marker);
    });
  },
);
