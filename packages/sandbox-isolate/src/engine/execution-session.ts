// The host side of one execution: enforces the tier 2 limits on what crosses the bridge,
// answers data requests through the configured handler and counts the stats.
import {
  type ExecutionContext,
  type ExecutionLimits,
  type ExecutionStats,
  type JsonValue,
  measureJson,
  type StatusEvent,
  type StatusLevel,
  utf8ByteLength,
} from '@coda/sandbox-core';
import { answerTooBigForHeap, type BridgeLimit, bridgeLimitError } from '../bridge/limit-errors.ts';
import { capText, maxJsonDepth, parseUntrustedJson, scrubHostPaths } from '../bridge/safe-json.ts';
import type { DataHandler } from '../config/data-handler.ts';
import type { DataAnswer, IsolateStats, JobHost, ParamsRefusal } from '../isolate/job.ts';
import type { ToolTable } from '../tools/tool-config.ts';
import {
  checkToolOutput,
  maxDescribedInputValues,
  maxValidatedInputValues,
  validateToolInput,
} from '../tools/tool-input-validation.ts';

/** Options of an {@link ExecutionSession}. */
export interface ExecutionSessionOptions {
  limits: ExecutionLimits;
  context: ExecutionContext;
  dataHandler: DataHandler | undefined;
  /** The configured tools, by name. */
  tools: ToolTable;
  /** Receives every status event that passed the caps. */
  emit: (event: StatusEvent) => void;
}

/**
 * Counts and caps one execution's bridge traffic. Status events beyond `maxStatusEvents`,
 * console calls beyond `maxConsoleCalls` and messages beyond `maxStatusBytes` are dropped
 * silently. A data request beyond `maxDataRequests`, or data beyond `maxDataBytes` (UTF-8 bytes of
 * params and responses together), ends the execution with `LIMIT_EXCEEDED`.
 */
export class ExecutionSession implements JobHost {
  readonly #limits: ExecutionLimits;
  readonly #context: ExecutionContext;
  readonly #handler: DataHandler | undefined;
  readonly #tools: ToolTable;
  readonly #emit: (event: StatusEvent) => void;
  // Created on the first data request: most executions make none, and an AbortController per
  // execution is measurable garbage for the host.
  #abort: AbortController | undefined;
  #closed = false;
  #dataRequests = 0;
  #dataBytes = 0;
  #statusEvents = 0;
  #consoleCalls = 0;
  #statusBytes = 0;
  #statusDropped = 0;

  constructor(options: ExecutionSessionOptions) {
    this.#limits = options.limits;
    this.#context = options.context;
    this.#handler = options.dataHandler;
    this.#tools = options.tools;
    this.#emit = options.emit;
  }

  status(source: string, level: StatusLevel, message: string, dataJson: string | undefined): void {
    const limits = this.#limits;
    if (source === 'console' && this.#consoleCalls >= limits.maxConsoleCalls) {
      this.#statusDropped++;
      return;
    }
    if (source === 'console') this.#consoleCalls++;
    const bytes = utf8ByteLength(message) + (dataJson === undefined ? 0 : utf8ByteLength(dataJson));
    if (
      this.#statusEvents >= limits.maxStatusEvents ||
      this.#statusBytes + bytes > limits.maxStatusBytes
    ) {
      this.#statusDropped++;
      return;
    }
    this.#statusEvents++;
    this.#statusBytes += bytes;
    const event: StatusEvent = { type: 'status', source, level, message };
    if (dataJson !== undefined) {
      try {
        event.data = parseUntrustedJson(dataJson);
      } catch {
        // Not JSON after all: the message still goes out, the data does not.
      }
    }
    this.#emit(event);
  }

  async data(
    paramsJson: string | null,
    units: number,
    refusal: ParamsRefusal,
    tool?: string,
  ): Promise<DataAnswer> {
    const limits = this.#limits;
    this.#dataRequests++;
    // The name comes from the isolate side: only a configured one is looked at (or echoed).
    if (tool !== undefined && !this.#tools.has(tool)) {
      return { ok: false, message: 'tools: no such tool is configured' };
    }
    const label = tool === undefined ? 'dataProxy.request' : `tools.${tool}`;
    // Checked again here, before anything is parsed: a worker is not trusted either.
    const measured =
      refusal !== '' || paramsJson === null
        ? refusal
        : paramsJson.length > limits.maxRequestBytes
          ? 'size'
          : measureJson(paramsJson, maxJsonDepth, limits.maxRequestValues);
    if (measured === 'depth') return this.#fatal('depth', 0, label);
    if (this.#dataRequests > limits.maxDataRequests) {
      return this.#fatal('maxDataRequests', this.#dataRequests, label);
    }
    const paramBytes = paramsJson === null || measured !== '' ? units : utf8ByteLength(paramsJson);
    if (measured === 'values') return this.#fatal('maxRequestValues', 0, label);
    if (measured === 'size' || paramBytes > limits.maxRequestBytes) {
      return this.#fatal('maxRequestBytes', paramBytes, label);
    }
    // zod's work grows with the input: a tool with a schema takes a bounded number of values,
    // and only a small one gets its issues listed (see tools/tool-input-validation.ts).
    let large = false;
    if (tool !== undefined && paramsJson !== null && this.#tools.get(tool)?.input !== undefined) {
      if (measureJson(paramsJson, maxJsonDepth, maxValidatedInputValues) === 'values') {
        return this.#fatal('toolInputValues', 0, label);
      }
      large = measureJson(paramsJson, maxJsonDepth, maxDescribedInputValues) === 'values';
    }
    if (paramsJson === null || !this.#addDataBytes(paramBytes)) {
      return this.#fatal(
        'maxDataBytes',
        this.#dataBytes + (paramsJson === null ? paramBytes : 0),
        label,
      );
    }
    const answer = await this.#dispatch(paramsJson, tool, large);
    if (answer.ok && !this.#addDataBytes(utf8ByteLength(answer.json))) {
      return this.#fatal('maxDataBytes', this.#dataBytes, label);
    }
    // A string needs at least a byte per UTF-16 unit: an answer longer than the whole heap can
    // never be copied in, and is refused here, before it crosses to a worker (where copying it
    // aborted the process and its co-tenants). The isolate side checks the room actually left.
    if (answer.ok && answer.json.length > limits.memoryMb * 1_048_576) {
      this.#closed = true;
      this.#abort?.abort();
      const fatal = answerTooBigForHeap(limits.memoryMb, answer.json.length);
      return { ok: false, message: fatal.message, fatal };
    }
    return answer;
  }

  /**
   * Answers one data request or tool call whose input passed every bound: the one place where
   * the host runs a data handler or a tool (validation, the handler, its answer as JSON).
   */
  async #dispatch(
    paramsJson: string,
    tool: string | undefined,
    large: boolean,
  ): Promise<DataAnswer> {
    const definition = tool === undefined ? undefined : this.#tools.get(tool);
    const handler = definition === undefined ? this.#handler : definition.handler;
    if (handler === undefined) {
      return { ok: false, message: 'dataProxy.request: no data handler is configured' };
    }
    // Once the execution's end is decided (a cancellation, a passed limit, its terminal event),
    // nothing of it starts: a side-effecting tool must not run for an execution that is over.
    if (this.#closed) return { ok: false, message: 'Execution has ended' };
    let value: unknown;
    try {
      this.#abort ??= new AbortController();
      const signal = this.#abort.signal;
      // A tool called without input gets undefined ('' is what the isolate sends then).
      let input: unknown =
        definition !== undefined && paramsJson === '' ? undefined : parseUntrustedJson(paramsJson);
      if (definition?.input !== undefined) {
        input = validateToolInput(definition.input, input, large, `tools.${tool} input`);
      }
      const answered = Promise.resolve(
        handler(input as JsonValue, { context: this.#context, index: this.#dataRequests, signal }),
      );
      // A handler that ignores its signal must not keep the bridge waiting after the end.
      value = await Promise.race([answered, whenAborted(signal)]);
      if (signal.aborted) return { ok: false, message: 'Execution has ended' };
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      return { ok: false, message: capText(scrubHostPaths(message), 1_000) };
    }
    if (definition?.output !== undefined) {
      const checked = checkToolOutput(definition.output, value);
      if (!checked.ok) {
        return {
          ok: false,
          message: `tools.${tool}: the tool's answer does not match its output schema`,
        };
      }
      value = checked.value;
    }
    // A tool that returns nothing (one that acts rather than answers) resolves with null.
    if (definition !== undefined && value === undefined) return { ok: true, json: 'null' };
    let json: string | undefined;
    try {
      json = JSON.stringify(value as JsonValue);
    } catch {
      json = undefined;
    }
    if (json === undefined) {
      return {
        ok: false,
        message:
          tool === undefined
            ? 'dataProxy.request: the data handler returned no JSON value'
            : `tools.${tool}: the tool returned no JSON value`,
      };
    }
    return { ok: true, json };
  }

  /**
   * Ends the data handler's work (its signal aborts) and refuses every later call. Called as soon
   * as the execution's end is decided, before its terminal event goes out.
   */
  close(): void {
    this.#closed = true;
    this.#abort?.abort();
  }

  /** The execution's stats, merging the isolate side's figures. */
  stats(isolate: IsolateStats | undefined, resultBytes: number): ExecutionStats {
    return {
      wallMs: round(isolate?.wallMs ?? 0),
      cpuMs: round(isolate?.cpuMs ?? 0),
      heapUsedBytes: isolate?.heapUsedBytes ?? 0,
      dataRequests: this.#dataRequests,
      dataBytes: this.#dataBytes,
      statusEvents: this.#statusEvents,
      statusDropped: this.#statusDropped + (isolate?.statusDropped ?? 0),
      statusBytes: this.#statusBytes,
      resultBytes,
    };
  }

  #addDataBytes(bytes: number): boolean {
    if (this.#dataBytes + bytes > this.#limits.maxDataBytes) {
      this.#dataBytes += bytes;
      return false;
    }
    this.#dataBytes += bytes;
    return true;
  }

  /** Ends the execution for a passed limit: nothing of it is dispatched any more. */
  #fatal(limit: BridgeLimit, size: number, label: string): DataAnswer {
    this.#closed = true;
    this.#abort?.abort();
    const fatal = bridgeLimitError(limit, this.#limits, size, label);
    return { ok: false, message: fatal.message, fatal };
  }
}

function whenAborted(signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) resolve();
    else signal.addEventListener('abort', () => resolve(), { once: true });
  });
}

function round(ms: number): number {
  return Math.round(ms * 1_000) / 1_000;
}
