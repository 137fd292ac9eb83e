// OpenTelemetry spans and metrics of an engine's executions: one span per execution with a child
// span per phase (admission, queue, run) and per data request or tool call, a counter of
// executions and a duration histogram, both by outcome. Only made when `@opentelemetry/api` is
// installed; it records nothing until the application registers an SDK (or passes providers).
import { createRequire } from 'node:module';
import type {
  ExecutionLimits,
  ExecutionStats,
  SandboxErrorJSON,
  TerminalEvent,
} from '@coda/sandbox-core';
import {
  defaultExecutionLimits,
  type JsonObject,
  SandboxValidationError,
} from '@coda/sandbox-core';
import type { Attributes, Context, Counter, Histogram, Span, Tracer } from '@opentelemetry/api';
import type { DataAnswer, JobHost, ParamsRefusal } from '../isolate/job.ts';
import { loadOtelApi, type OtelApi } from './otel-api.ts';
import type { TelemetryConfig } from './telemetry-config.ts';
import {
  attributeNames,
  limitAttribute,
  metricNames,
  rejectedCall,
  spanNames,
  statAttribute,
} from './telemetry-names.ts';

/** The phases of an execution, in order; each is a child span of the execution's span. */
export type ExecutionPhase = 'admission' | 'queue' | 'run';

const scope = '@coda/sandbox-isolate';
// ../../package.json from both src/telemetry and dist/telemetry.
const version = (createRequire(import.meta.url)('../../package.json') as { version: string })
  .version;

/** Seconds; from a trivial in-process run (about 1 ms) to the longest timeoutMs worth having. */
const durationBuckets = [
  0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300,
];

/** An engine's tracer and instruments. */
export class EngineTelemetry {
  readonly api: OtelApi;
  readonly tracer: Tracer;
  readonly executions: Counter;
  readonly duration: Histogram;
  readonly isolation: string;

  /**
   * The telemetry of an engine, or undefined when `@opentelemetry/api` is not installed (then
   * providers in `config` are refused: they could not be used).
   */
  static create(
    config: TelemetryConfig | undefined,
    isolation: string,
  ): EngineTelemetry | undefined {
    const api = loadOtelApi();
    if (api !== undefined) return new EngineTelemetry(api, config ?? {}, isolation);
    if (config?.tracerProvider === undefined && config?.meterProvider === undefined)
      return undefined;
    const issue = {
      path: 'telemetry',
      message: '@opentelemetry/api is not installed',
      received: 'providers',
    };
    throw new SandboxValidationError(`Invalid SandboxEngine config: telemetry: ${issue.message}`, {
      issues: [issue],
    });
  }

  private constructor(api: OtelApi, config: TelemetryConfig, isolation: string) {
    this.api = api;
    this.isolation = isolation;
    this.tracer = (config.tracerProvider ?? api.trace.getTracerProvider()).getTracer(
      scope,
      version,
    );
    const meter = (config.meterProvider ?? api.metrics.getMeterProvider()).getMeter(scope, version);
    this.executions = meter.createCounter(metricNames.executions, {
      description: 'Executions that ended, by outcome (result or error code)',
      unit: '{execution}',
    });
    this.duration = meter.createHistogram(metricNames.duration, {
      description: 'Time from submit() to the terminal event, by outcome',
      unit: 's',
      advice: { explicitBucketBoundaries: durationBuckets },
    });
  }

  /** Starts the span of one execution, as a child of the caller's active span if any. */
  start(executionId: string): ExecutionTrace {
    return new ExecutionTrace(this, executionId);
  }
}

/** The spans of one execution. */
export class ExecutionTrace {
  readonly #telemetry: EngineTelemetry;
  readonly #started = performance.now();
  readonly #root: Span;
  /**
   * Whether the execution's span records (an SDK is registered and sampled it). When it does not,
   * no child span is made: with no SDK, or a parent-based sampler, they would not record either.
   */
  readonly #recording: boolean;
  readonly #rootContext: Context;
  #phase: Span | undefined;
  #phaseName: ExecutionPhase | undefined;
  #phaseContext: Context;
  #calls = 0;
  /** Set by end(): a cancelled execution's isolate may still call the host for a while. */
  #ended = false;

  constructor(telemetry: EngineTelemetry, executionId: string) {
    this.#telemetry = telemetry;
    const { api, tracer } = telemetry;
    const active = api.context.active();
    this.#root = tracer.startSpan(
      spanNames.execution,
      {
        attributes: {
          [attributeNames.executionId]: executionId,
          [attributeNames.isolation]: telemetry.isolation,
        },
      },
      active,
    );
    this.#recording = this.#root.isRecording();
    this.#rootContext = api.trace.setSpan(active, this.#root);
    this.#phaseContext = this.#rootContext;
  }

  /** Records the language of the code and the limits the execution runs under. */
  request(limits: Readonly<ExecutionLimits>, language: string): void {
    if (!this.#recording) return;
    this.#root.setAttribute(attributeNames.language, language);
    let attributes = limitAttributes.get(limits);
    if (attributes === undefined) {
      attributes = prefixed(limits, limitAttribute);
      limitAttributes.set(limits, attributes);
    }
    this.#root.setAttributes(attributes);
  }

  /** Starts the admission phase: `active` executions of at most `max`, `guards` to pass. */
  admission(active: number, max: number, guards: number): void {
    this.enter('admission', {
      [attributeNames.concurrencyActive]: active,
      [attributeNames.concurrencyMax]: max,
      [attributeNames.guards]: guards,
    });
  }

  /** Ends the current phase's span (it went well) and starts `phase`'s. */
  enter(phase: ExecutionPhase, attributes?: Attributes): void {
    if (this.#ended || !this.#recording) return;
    this.#phase?.end();
    const { api, tracer } = this.#telemetry;
    this.#phaseName = phase;
    this.#phase = tracer.startSpan(
      spanNames[phase],
      attributes === undefined ? {} : { attributes },
      this.#rootContext,
    );
    this.#phaseContext = api.trace.setSpan(this.#rootContext, this.#phase);
  }

  /** Runs `work` with the current phase's span active (so a guard's own spans nest under it). */
  within<T>(work: () => T): T {
    if (!this.#recording) return work();
    return this.#telemetry.api.context.with(this.#phaseContext, work);
  }

  /**
   * `host` with a span around each data request and tool call (whose handler runs with it
   * active), and the start of the run phase when the backend hands the job to an isolate.
   * `isTool` says whether a name from the isolate side is a configured tool: only those are
   * recorded.
   */
  host(host: JobHost, isTool: (name: string) => boolean): JobHost {
    if (!this.#recording) return host;
    return {
      status: (source, level, message, dataJson) => host.status(source, level, message, dataJson),
      data: (paramsJson, units, refusal, tool) =>
        this.#data(host, isTool, paramsJson, units, refusal, tool),
      // Once: a job lost with a worker and run again is still in its run phase.
      dispatched: () => {
        if (this.#phaseName === 'queue') this.enter('run');
      },
    };
  }

  /** Ends every open span with the outcome of `event` and records the metrics. */
  end(event: TerminalEvent): void {
    this.#ended = true;
    const outcome = event.type === 'result' ? 'result' : event.code;
    const failed = event.type === 'error';
    for (const span of this.#phase === undefined ? [this.#root] : [this.#phase, this.#root]) {
      if (failed) {
        span.setStatus({
          code: this.#telemetry.api.SpanStatusCode.ERROR,
          message: statusMessage(event.code, event.details),
        });
        span.setAttribute(attributeNames.errorType, event.code);
      }
    }
    if (this.#recording) {
      this.#root.setAttribute(attributeNames.outcome, outcome);
      if (event.stats !== undefined) this.#root.setAttributes(prefixed(event.stats, statAttribute));
    }
    this.#phase?.end();
    this.#root.end();
    const attributes = {
      [attributeNames.outcome]: outcome,
      [attributeNames.isolation]: this.#telemetry.isolation,
    };
    this.#telemetry.executions.add(1, attributes);
    this.#telemetry.duration.record((performance.now() - this.#started) / 1_000, attributes);
  }

  async #data(
    host: JobHost,
    isTool: (name: string) => boolean,
    paramsJson: string | null,
    units: number,
    refusal: ParamsRefusal,
    tool: string | undefined,
  ): Promise<DataAnswer> {
    if (this.#ended) return host.data(paramsJson, units, refusal, tool);
    const { api, tracer } = this.#telemetry;
    const attributes: Attributes = { [attributeNames.dataRequestIndex]: ++this.#calls };
    if (tool !== undefined) {
      attributes[attributeNames.operationName] = 'execute_tool';
      // The name comes from user code: only a configured one is recorded.
      if (isTool(tool)) attributes[attributeNames.toolName] = tool;
    }
    const span = tracer.startSpan(
      tool === undefined ? spanNames.dataRequest : spanNames.toolCall,
      { attributes },
      this.#phaseContext,
    );
    try {
      const answer = await api.context.with(api.trace.setSpan(this.#phaseContext, span), () =>
        host.data(paramsJson, units, refusal, tool),
      );
      if (!answer.ok) failSpan(api, span, answer.fatal);
      return answer;
    } finally {
      span.end();
    }
  }
}

// Most executions run under their engine's default limits, one object: its attributes once.
const limitAttributes = new WeakMap<Readonly<ExecutionLimits>, Attributes>();

// A call's error messages echo what user code sent (a rejected tool input names its values) and
// what a handler threw: its span says only the code, and the limit when one was passed.
function failSpan(api: OtelApi, span: Span, fatal: SandboxErrorJSON | undefined): void {
  const code = fatal?.code ?? rejectedCall;
  span.setStatus({ code: api.SpanStatusCode.ERROR, message: statusMessage(code, fatal?.details) });
  span.setAttribute(attributeNames.errorType, code);
}

/** Fields of `details` a status may name: limit names, never a path or a value of user code. */
const limitFields: ReadonlySet<string> = new Set([
  ...Object.keys(defaultExecutionLimits),
  'depth',
  'memoryMb',
  'toolInputValues',
]);

/**
 * The status message of a failed span, built from the error code and the name of a passed limit
 * only: an error's own message carries user data (a thrown message, a value, a path).
 */
export function statusMessage(code: string, details: JsonObject | undefined): string {
  const field = details?.field;
  return typeof field === 'string' && limitFields.has(field) ? `${code} (${field})` : code;
}

function prefixed(
  values: Readonly<ExecutionLimits> | ExecutionStats,
  name: (field: string) => string,
): Attributes {
  const attributes: Attributes = {};
  for (const [field, value] of Object.entries(values)) {
    if (typeof value === 'number') attributes[name(field)] = value;
  }
  return attributes;
}
