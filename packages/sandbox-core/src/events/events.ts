// The events every runner emits: any number of `status` events, then exactly one terminal event.
import type { SandboxErrorCode } from '../errors/codes.ts';
import type { JsonObject, JsonValue } from '../json-value.ts';

/** Severity of a status event; `console.log` maps to `info`. */
export type StatusLevel = 'info' | 'warn' | 'error';

/** Progress or log output from running code. */
export interface StatusEvent {
  /** Always `status`: the discriminant of {@link SandboxEvent}. */
  type: 'status';
  /** Who produced it: `reportStatus`, `console`, or a runner-defined source. */
  source: string;
  /** How severe it is; `console.log` and `console.info` map to `info`. */
  level: StatusLevel;
  /** The text, capped with every other status message by the `maxStatusBytes` limit. */
  message: string;
  /** Structured data passed along with the message (JSON only). */
  data?: JsonValue;
}

/** Figures of one execution, reported with its terminal event. Times are approximate. */
export interface ExecutionStats {
  /** Wall-clock time from start of execution to its end, in milliseconds. */
  wallMs: number;
  /** CPU time the code used, in milliseconds. */
  cpuMs: number;
  /** Heap in use when the execution ended, in bytes. */
  heapUsedBytes: number;
  /** `dataProxy.request` calls made. */
  dataRequests: number;
  /** UTF-8 bytes of data request params sent and responses received. */
  dataBytes: number;
  /** Status events emitted (console included). */
  statusEvents: number;
  /** Status events dropped by a cap. */
  statusDropped: number;
  /** UTF-8 bytes of status messages emitted. */
  statusBytes: number;
  /** UTF-8 bytes of the result's JSON (0 when there is none). */
  resultBytes: number;
}

/** The execution finished and returned `payload`. */
export interface ResultEvent {
  /** Always `result`: the discriminant of {@link SandboxEvent}. */
  type: 'result';
  /** The returned value, as JSON (`undefined` arrives as `null`). */
  payload: JsonValue;
  /** What the execution used. */
  stats: ExecutionStats;
}

/** The execution ended without a result. */
export interface ErrorEvent {
  /** Always `error`: the discriminant of {@link SandboxEvent}. */
  type: 'error';
  /** Why the execution ended; see {@link SandboxErrorCode}. */
  code: SandboxErrorCode;
  /** What happened, in words. */
  message: string;
  /** Figures that explain the failure (the limit, the size, retryAfterMs, issues). */
  details?: JsonObject;
  /** Present when the execution got far enough to measure anything. */
  stats?: ExecutionStats;
}

/** An event that ends an execution. */
export type TerminalEvent = ResultEvent | ErrorEvent;

/** Any event a runner emits. */
export type SandboxEvent = StatusEvent | TerminalEvent;

/** Whether `event` ends its execution. */
export function isTerminalEvent(event: SandboxEvent): event is TerminalEvent {
  return event.type === 'result' || event.type === 'error';
}
