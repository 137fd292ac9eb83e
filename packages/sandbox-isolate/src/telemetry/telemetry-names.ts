// The names of every span, attribute and metric the engine records, in OpenTelemetry semantic
// conventions style: one table, so the docs, the tests and the code agree.

/** Span names: one execution span, its three phases, one span per data request or tool call. */
export const spanNames = {
  /** The whole execution, from submit() to its terminal event. */
  execution: 'coda.sandbox.execution',
  /** Admission: the tier 5 capacity check and the guards (rate limits, budgets). */
  admission: 'coda.sandbox.admission',
  /** Waiting on the host for a worker process whose main thread is free. */
  queue: 'coda.sandbox.queue',
  /** The code on its isolate, until the terminal event. */
  run: 'coda.sandbox.run',
  /** One `dataProxy.request(params)`. */
  dataRequest: 'coda.sandbox.data_request',
  /** One `tools.NAME(input)` call. */
  toolCall: 'coda.sandbox.tool_call',
} as const;

/** Attribute names. Limits and stats get one attribute per field, see {@link limitAttribute}. */
export const attributeNames = {
  executionId: 'coda.sandbox.execution.id',
  isolation: 'coda.sandbox.isolation',
  /** `javascript` or `typescript`. */
  language: 'coda.sandbox.language',
  /** `result`, or the error code (`TIMEOUT`, `CAPACITY`, ...). */
  outcome: 'coda.sandbox.outcome',
  /** The error code, on a span whose status is ERROR (OpenTelemetry's general attribute). */
  errorType: 'error.type',
  /** Executions admitted and not yet finished when this one asked for admission. */
  concurrencyActive: 'coda.sandbox.concurrency.active',
  /** The tier 5 ceiling (`maxConcurrent`). */
  concurrencyMax: 'coda.sandbox.concurrency.max',
  /** How many guards the execution had to pass. */
  guards: 'coda.sandbox.guards',
  /** 1 for the execution's first data request or tool call, 2 for the second, ... */
  dataRequestIndex: 'coda.sandbox.data_request.index',
  /** OpenTelemetry's generative-AI attributes, for the tool a model's code called. */
  operationName: 'gen_ai.operation.name',
  toolName: 'gen_ai.tool.name',
} as const;

/** Metric names. */
export const metricNames = {
  /** Counter of finished executions, by outcome. */
  executions: 'coda.sandbox.executions',
  /** Histogram of execution durations (submit to terminal event), in seconds, by outcome. */
  duration: 'coda.sandbox.execution.duration',
} as const;

/** `error.type` of a data request or tool call that rejected in user code but let it go on. */
export const rejectedCall = 'rejected';

// Derived from the field names, so a limit or stat added in core gets its attribute unasked;
// cached, as every execution asks for every one.
const derived = new Map<string, string>();
function fieldAttribute(prefix: string, field: string): string {
  const key = `${prefix}${field}`;
  let name = derived.get(key);
  if (name === undefined) {
    name = `${prefix}${field.replace(/[A-Z]/g, (upper) => `_${upper.toLowerCase()}`)}`;
    derived.set(key, name);
  }
  return name;
}

/** The attribute of one limit: `timeoutMs` is `coda.sandbox.limits.timeout_ms`. */
export function limitAttribute(field: string): string {
  return fieldAttribute('coda.sandbox.limits.', field);
}

/** The attribute of one stat: `wallMs` is `coda.sandbox.stats.wall_ms`. */
export function statAttribute(field: string): string {
  return fieldAttribute('coda.sandbox.stats.', field);
}
