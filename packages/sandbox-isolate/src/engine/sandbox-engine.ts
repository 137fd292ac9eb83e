// The public entry point: validates a request, applies tiers 1, 2 and 5 and the guards, runs the
// code on a single-use isolate and reports status events and exactly one terminal event.
import { randomUUID } from 'node:crypto';
import {
  acquireGuards,
  createExecutionChannel,
  type ErrorEvent,
  type ExecutionChannel,
  type ExecutionContext,
  type ExecutionHandle,
  type ExecutionLimits,
  type GuardLease,
  type Logger,
  resolveExecutionLimits,
  SandboxCancelledError,
  SandboxCapacityError,
  type SandboxErrorJSON,
  SandboxValidationError,
  silentLogger,
  type TerminalEvent,
  toSandboxErrorJSON,
  utf8ByteLength,
} from '@coda/sandbox-core';
import type { ExecutionBackend } from '../backend/execution-backend.ts';
import { InProcessBackend } from '../backend/in-process-backend.ts';
import { WorkerBackend } from '../backend/worker-backend.ts';
import { parseUntrustedJson } from '../bridge/safe-json.ts';
import {
  type ResolvedEngineConfig,
  resolveEngineConfig,
  type SandboxEngineConfig,
  type SubmitRequest,
  validateSubmitRequest,
} from '../config/engine-config.ts';
import { resultTooBig } from '../isolate/code-executor.ts';
import type { JobOutcome } from '../isolate/job.ts';
import type { CodeLanguage } from '../isolate/typescript-input.ts';
import { withSourceLine } from '../isolate/user-code-location.ts';
import { checkWasmModules } from '../isolate/wasm-modules.ts';
import { EngineTelemetry, type ExecutionTrace } from '../telemetry/engine-telemetry.ts';
import { type ToolTable, toolTable } from '../tools/tool-config.ts';
import { renderToolDeclarations } from '../tools/tool-declarations.ts';
import { ExecutionSession } from './execution-session.ts';

/** The warning logged when an engine is created with `isolation: 'in-process'`. */
export const inProcessWarning =
  "[SandboxEngine] isolation: 'in-process' does not contain crashes or memory: a V8 or isolated-vm failure in user code takes this process with it (see docs/security.md); use the default 'process' mode for untrusted code";

/** Figures of an engine at one moment. */
export interface SandboxEngineStats {
  /** Executions admitted and not yet finished. */
  active: number;
  /** The tier 5 ceiling. */
  maxConcurrent: number;
  /** `process` or `in-process`. */
  isolation: 'process' | 'in-process';
  /** Process ids of the live worker processes (empty in `in-process` mode). */
  workerPids: number[];
}

/**
 * Runs LLM-generated JavaScript in single-use V8 isolates under every tier 1, 2 and 5 limit.
 *
 * ```ts
 * const engine = new SandboxEngine({ dataHandler: async (params) => db.lookup(params) });
 * const event = await engine.submit({ code: 'return 1 + 1' }).result; // { type: 'result', payload: 2, stats }
 * await engine.dispose(); // or create it with `await using` and let the block end
 * ```
 */
export class SandboxEngine {
  readonly #config: ResolvedEngineConfig;
  readonly #defaults: ExecutionLimits;
  readonly #backend: ExecutionBackend;
  readonly #logger: Logger;
  readonly #tools: ToolTable;
  /** Undefined when `@opentelemetry/api` is not installed: then no span is even started. */
  readonly #telemetry: EngineTelemetry | undefined;
  readonly #running = new Set<ExecutionHandle>();
  /** Executions submitted and not yet settled; dispose() waits for them. */
  #inFlight = 0;
  #onDrained: (() => void) | undefined;
  #active = 0;
  #jobs = 0;
  #disposed = false;

  /** Throws `SandboxValidationError` naming every bad field of `config`. */
  constructor(config: SandboxEngineConfig = {}) {
    this.#config = resolveEngineConfig(config);
    checkWasmModules(this.#config.wasmModules);
    this.#defaults = resolveExecutionLimits(this.#config.limits);
    this.#logger = this.#config.logger ?? silentLogger;
    this.#tools = toolTable(this.#config.tools);
    this.#telemetry = EngineTelemetry.create(this.#config.telemetry, this.#config.isolation);
    const runtime = {
      maxConcurrent: this.#config.maxConcurrent,
      poolSize: this.#config.poolSize,
      poolMemoryMb: this.#defaults.memoryMb,
      logger: this.#logger,
      toolNames: [...this.#tools.keys()],
    };
    if (this.#config.isolation === 'in-process') {
      // Measured in docs/security.md: known isolated-vm crashers take the host down with them,
      // and ICU-heavy Intl use grows the host's memory far past memoryMb.
      this.#logger.warn({ isolation: 'in-process' }, inProcessWarning);
    }
    this.#backend =
      this.#config.isolation === 'in-process'
        ? new InProcessBackend(
            {
              ...runtime,
              onCatastrophicError: (message) =>
                this.#logger.error(
                  { message },
                  'isolated-vm catastrophic error in the host process',
                ),
            },
            this.#config.wasmModules,
          )
        : new WorkerBackend({
            ...runtime,
            workers: this.#config.workers,
            maxQueueWaitMs: this.#config.maxQueueWaitMs,
            workerBaseMemoryMb: this.#config.workerBaseMemoryMb,
            defaultLimits: this.#defaults,
            wasmModules: this.#config.wasmModules,
          });
  }

  /** The limits an execution gets when its request sets none. */
  get defaultLimits(): Readonly<ExecutionLimits> {
    return this.#defaults;
  }

  /**
   * TypeScript declarations of the `tools` object user code sees, generated from each tool's zod
   * schema with the descriptions as doc comments: ready to put in a model's prompt.
   *
   * ```ts
   * declare const tools: {
   *   /** Orders of one region. *\/
   *   getOrders(input: {
   *     region: "EMEA" | "APAC";
   *   }): Promise<unknown>;
   * };
   * ```
   */
  toolDeclarations(): string {
    return renderToolDeclarations(this.#tools);
  }

  /** Current figures: active executions and the ceiling. */
  stats(): SandboxEngineStats {
    return {
      active: this.#active,
      maxConcurrent: this.#config.maxConcurrent,
      isolation: this.#config.isolation,
      workerPids: this.#backend.pids(),
    };
  }

  /** Resolves when workers are up and warm isolates are ready (optional: submit works before). */
  ready(): Promise<void> {
    return this.#backend.ready();
  }

  /**
   * Starts one execution. Never throws: a bad request, a refusal and every failure arrive as the
   * handle's terminal `error` event.
   */
  submit(request: SubmitRequest): ExecutionHandle {
    const executionId = givenExecutionId(request) ?? randomUUID();
    const controller = new AbortController();
    // Set once the terminal event is decided; it goes out only after the leases are released (a
    // round trip for a Redis guard), and a cancel meanwhile comes after the execution ended.
    const end: Decided = { decided: false };
    const channel = createExecutionChannel(executionId, (reason) => {
      if (end.decided) return;
      const error = new SandboxCancelledError(reason);
      controller.abort(error);
      channel.push(errorEvent(error.toJSON()));
    });
    // Ended with the event the caller gets, however the execution ends (a cancellation ends it
    // before its isolate has stopped).
    const trace = this.#telemetry?.start(executionId);
    if (trace !== undefined) void channel.handle.result.then((event) => trace.end(event));
    this.#inFlight++;
    void this.#settle(request, executionId, channel, controller, trace, end);
    return channel.handle;
  }

  /** Runs one execution and resolves with its terminal event. Never rejects. */
  run(request: SubmitRequest): Promise<TerminalEvent> {
    return this.submit(request).result;
  }

  /**
   * Ends every execution (`CANCELLED`), then frees every isolate and worker process. Later
   * submissions end with `CANCELLED` at once.
   */
  async dispose(): Promise<void> {
    if (this.#disposed) return;
    this.#disposed = true;
    for (const handle of [...this.#running]) handle.cancel('SandboxEngine disposed');
    await this.#backend.dispose();
    if (this.#inFlight > 0) {
      await new Promise<void>((resolve) => {
        this.#onDrained = resolve;
      });
    }
  }

  /** {@link dispose}, for `await using engine = new SandboxEngine(...)`. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.dispose();
  }

  // One promise per execution and no Set of them: the host allocates little per execution.
  async #settle(
    request: SubmitRequest,
    executionId: string,
    channel: ExecutionChannel,
    controller: AbortController,
    trace: ExecutionTrace | undefined,
    end: Decided,
  ): Promise<void> {
    try {
      await this.#execute(request, executionId, channel, controller, trace, end);
    } catch (error) {
      this.#logger.error({ err: error, executionId }, 'execution failed unexpectedly');
      channel.push(errorEvent(toSandboxErrorJSON(error)));
    } finally {
      if (--this.#inFlight === 0) this.#onDrained?.();
    }
  }

  async #execute(
    request: SubmitRequest,
    executionId: string,
    channel: ExecutionChannel,
    controller: AbortController,
    trace: ExecutionTrace | undefined,
    end: Decided,
  ): Promise<void> {
    const fail = (error: unknown) => channel.push(errorEvent(toSandboxErrorJSON(error)));
    if (this.#disposed) {
      fail(new SandboxCancelledError('SandboxEngine disposed'));
      return;
    }
    let valid: SubmitRequest;
    let limits: ExecutionLimits;
    try {
      valid = validateSubmitRequest(request);
      limits =
        valid.limits === undefined
          ? this.#defaults
          : resolveExecutionLimits(valid.limits, this.#defaults);
      checkCodeSize(valid.code, limits.maxCodeBytes);
    } catch (error) {
      fail(error);
      return;
    }
    const language = valid.language ?? this.#config.language;
    trace?.request(limits, language);
    trace?.admission(this.#active, this.#config.maxConcurrent, this.#config.guards.length);
    if (this.#active >= this.#config.maxConcurrent) {
      const max = this.#config.maxConcurrent;
      fail(
        new SandboxCapacityError(`IsolateManager at capacity (${max})`, {
          details: { maxConcurrent: max },
        }),
      );
      return;
    }
    this.#active++;
    this.#running.add(channel.handle);
    const userSignal = valid.signal;
    const onUserAbort =
      userSignal === undefined
        ? undefined
        : () => channel.handle.cancel('Execution cancelled by its AbortSignal');
    if (userSignal !== undefined && onUserAbort !== undefined) {
      if (userSignal.aborted) onUserAbort();
      userSignal.addEventListener('abort', onUserAbort, { once: true });
    }
    // The terminal event goes out only after the slot and the guard leases are released, so a
    // caller who submits again as soon as it has the result is never refused for capacity.
    let terminal: TerminalEvent | undefined;
    try {
      const context: ExecutionContext = { ...valid.context, executionId };
      let lease: GuardLease;
      try {
        // Under the admission span, so that a guard's own spans (Redis calls) nest there.
        const admit = () => acquireGuards(this.#config.guards, context, controller.signal);
        lease =
          this.#config.guards.length === 0 ? noLease : await (trace?.within(admit) ?? admit());
      } catch (error) {
        terminal = errorEvent(toSandboxErrorJSON(error));
        return;
      }
      try {
        if (this.#disposed) channel.handle.cancel('SandboxEngine disposed');
        if (controller.signal.aborted) return;
        terminal = await this.#run(
          valid.code,
          language,
          limits,
          context,
          channel,
          controller.signal,
          trace,
        );
        // Decided: a cancel from here on (while the leases are released) finds it ended.
        end.decided = true;
      } finally {
        if (lease !== noLease) await lease.release();
      }
    } finally {
      if (onUserAbort !== undefined) userSignal?.removeEventListener('abort', onUserAbort);
      this.#running.delete(channel.handle);
      this.#active--;
      if (terminal !== undefined) channel.push(terminal);
    }
  }

  async #run(
    code: string,
    language: CodeLanguage,
    limits: ExecutionLimits,
    context: ExecutionContext,
    channel: ExecutionChannel,
    signal: AbortSignal,
    trace: ExecutionTrace | undefined,
  ): Promise<TerminalEvent> {
    const session = new ExecutionSession({
      limits,
      context,
      dataHandler: this.#config.dataHandler,
      tools: this.#tools,
      emit: (event) => channel.push(event),
    });
    // A cancellation decides the end at once (its terminal event goes out now): from here no
    // handler of this execution starts, and running ones see their signal aborted first.
    const closeSession = () => session.close();
    signal.addEventListener('abort', closeSession, { once: true });
    trace?.enter('queue');
    let outcome: JobOutcome;
    try {
      outcome = await this.#backend.execute(
        // The job id is the engine's own: callers may reuse an executionId (a retry).
        { id: String(++this.#jobs), code, limits, language },
        trace === undefined ? session : trace.host(session, (name) => this.#tools.has(name)),
        signal,
      );
    } finally {
      signal.removeEventListener('abort', closeSession);
      session.close();
    }
    // The position comes from the isolate's side: checked here against the code as given, and
    // the line the model wrote added.
    if (outcome.kind === 'error') outcome.error = withSourceLine(outcome.error, code);
    const event = toTerminalEvent(outcome, session, limits);
    if (this.#logger !== silentLogger) {
      this.#logger.debug(
        {
          executionId: context.executionId,
          type: event.type,
          code: event.type === 'error' ? event.code : undefined,
          stats: event.stats,
        },
        'execution ended',
      );
    }
    return event;
  }
}

/** Whether an execution's terminal event is decided (see {@link SandboxEngine.submit}). */
interface Decided {
  decided: boolean;
}

const noLease: GuardLease = { release: async () => {} };

function givenExecutionId(request: unknown): string | undefined {
  if (typeof request !== 'object' || request === null) return undefined;
  const context = (request as { context?: unknown }).context;
  if (typeof context !== 'object' || context === null) return undefined;
  const id = (context as { executionId?: unknown }).executionId;
  return typeof id === 'string' && id.length > 0 && id.length <= 65_536 ? id : undefined;
}

/** maxCodeBytes in UTF-8 bytes, before any V8 work; UTF-16 length bounds it cheaply first. */
function checkCodeSize(code: string, maxCodeBytes: number): void {
  const size = code.length > maxCodeBytes ? code.length : utf8ByteLength(code);
  if (size <= maxCodeBytes) return;
  const issue = {
    path: 'code',
    message: `is ${size} bytes or more, over maxCodeBytes (${maxCodeBytes})`,
    received: `${size} bytes`,
  };
  throw new SandboxValidationError(`Code is too large: ${issue.message}`, {
    issues: [issue],
    details: { field: 'maxCodeBytes', limit: maxCodeBytes, size },
  });
}

function errorEvent(json: SandboxErrorJSON, stats?: ErrorEvent['stats']): ErrorEvent {
  const event: ErrorEvent = { type: 'error', code: json.code, message: json.message };
  if (json.details !== undefined) event.details = json.details;
  if (stats !== undefined) event.stats = stats;
  return event;
}

function toTerminalEvent(
  outcome: JobOutcome,
  session: ExecutionSession,
  limits: ExecutionLimits,
): TerminalEvent {
  if (outcome.kind === 'error') return errorEvent(outcome.error, session.stats(outcome.stats, 0));
  const bytes = utf8ByteLength(outcome.json);
  if (bytes > limits.maxResultBytes) {
    return errorEvent(resultTooBig(bytes, limits.maxResultBytes), session.stats(outcome.stats, 0));
  }
  try {
    const payload = parseUntrustedJson(outcome.json);
    return { type: 'result', payload, stats: session.stats(outcome.stats, bytes) };
  } catch (error) {
    const json = toSandboxErrorJSON(error);
    return errorEvent(
      { ...json, message: `The isolate returned a malformed result: ${json.message}` },
      session.stats(outcome.stats, 0),
    );
  }
}
