// SandboxEngineConfig.telemetry: where an engine sends its OpenTelemetry spans and metrics.
import type { MeterProvider, TracerProvider } from '@opentelemetry/api';
import { z } from 'zod';

/**
 * Where an engine sends its spans and metrics (see "Observability" in docs/isolate.md). Both
 * default to the global providers of `@opentelemetry/api`, the ones an application's SDK
 * registers; without that package installed the engine records nothing.
 */
export interface TelemetryConfig {
  /** Makes the engine's tracer. Default: `trace.getTracerProvider()`. */
  tracerProvider?: TracerProvider | undefined;
  /** Makes the engine's meter. Default: `metrics.getMeterProvider()`. */
  meterProvider?: MeterProvider | undefined;
}

const provider = <Provider>(method: string, what: string) =>
  z.custom<Provider>(
    (value) =>
      typeof value === 'object' &&
      value !== null &&
      typeof (value as Record<string, unknown>)[method] === 'function',
    `expected an OpenTelemetry ${what}`,
  );

/** The zod schema of `SandboxEngineConfig.telemetry`. */
export const TelemetryConfigSchema = z.strictObject({
  tracerProvider: provider<TracerProvider>('getTracer', 'TracerProvider').optional(),
  meterProvider: provider<MeterProvider>('getMeter', 'MeterProvider').optional(),
});
