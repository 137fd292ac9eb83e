// SandboxEngineConfig and SubmitRequest: their types, zod schemas and defaults.
import {
  type ExecutionContext,
  type ExecutionGuard,
  type ExecutionLimits,
  ExecutionLimitsSchema,
  type Logger,
  SandboxValidationError,
  validate,
} from '@coda/sandbox-core';
import { z } from 'zod';
import type { CodeLanguage } from '../isolate/typescript-input.ts';
import type { WasmModuleConfig } from '../isolate/wasm-modules.ts';
import { type TelemetryConfig, TelemetryConfigSchema } from '../telemetry/telemetry-config.ts';
import { type ToolSet, ToolSetSchema } from '../tools/tool-config.ts';
import type { DataHandler } from './data-handler.ts';

/** Where isolates run. */
export type IsolationMode = 'process' | 'in-process';

/** Configuration of a {@link SandboxEngine}. Every field is optional. */
export interface SandboxEngineConfig {
  /** Default limits of every execution, over core's `defaultExecutionLimits`. */
  limits?: Partial<ExecutionLimits> | undefined;
  /** Tier 5: most executions running at once; more are refused with `CAPACITY`. Default 8. */
  maxConcurrent?: number | undefined;
  /**
   * Longest an admitted execution may wait on the host for a worker (`process` mode: every
   * worker's main thread is taken, or it waits to run again alone after a worker death) before
   * it ends with `CAPACITY` (`details.limit: 'maxQueueWaitMs'`), in ms. Its `timeoutMs` starts
   * only when it leaves the queue. Default 120 000. No queue in `in-process` mode.
   */
  maxQueueWaitMs?: number | undefined;
  /** Warm isolates kept ready (per worker in `process` mode), about 1.5 MiB each. Default 4. */
  poolSize?: number | undefined;
  /**
   * `process` (default): isolates run in supervised worker processes, so a V8 failure or a
   * memory blow-up kills a worker, not the host. `in-process`: isolates run in the host process
   * (lower latency; one catastrophic isolate failure can crash or deadlock the host).
   */
  isolation?: IsolationMode | undefined;
  /** Worker processes in `process` mode. Default 2. */
  workers?: number | undefined;
  /**
   * Resident memory a worker may use beyond what its running executions are allowed
   * (3 × memoryMb each), in MiB. A worker above that is killed and its executions end with
   * `OOM`. Default 256. A worker that holds no job and has grown more than half of this since
   * it started (what large past executions left) is replaced, so the growth does not count
   * against the next execution.
   */
  workerBaseMemoryMb?: number | undefined;
  /** Answers `dataProxy.request`. Without it every request rejects in user code. */
  dataHandler?: DataHandler | undefined;
  /**
   * Named tools user code calls as `await tools.NAME(input)`; each call counts as a data
   * request. `engine.toolDeclarations()` renders their TypeScript declarations for a prompt.
   */
  tools?: ToolSet | undefined;
  /** Admission rules run before each execution (rate limits, budgets); see core. */
  guards?: readonly ExecutionGuard[] | undefined;
  /** Receives the engine's logs (pino-compatible). Silent by default. */
  logger?: Logger | undefined;
  /**
   * Where the OpenTelemetry spans and metrics go (a span per execution, its phases and calls;
   * executions by outcome, their durations). Default: the global providers of
   * `@opentelemetry/api` when it is installed (an optional peer); nothing is recorded without it.
   */
  telemetry?: TelemetryConfig | undefined;
  /** WASM modules made available to user code as globals. */
  wasmModules?: readonly WasmModuleConfig[] | undefined;
  /**
   * The language of a request that does not say: `javascript` (default) or `typescript`
   * (stripped of its types before it runs, see {@link SubmitRequest.language}).
   */
  language?: CodeLanguage | undefined;
}

/** One execution request. */
export interface SubmitRequest {
  /** The body of an async function; its `return` value is the result payload. */
  code: string;
  /** Limits of this execution, over the engine's defaults. */
  limits?: Partial<ExecutionLimits> | undefined;
  /** Who runs it; `executionId` is generated when missing. */
  context?: Partial<ExecutionContext> | undefined;
  /** Aborting it cancels the execution (`CANCELLED`). */
  signal?: AbortSignal | undefined;
  /**
   * `typescript`: `code` is TypeScript, stripped of its types with Node's
   * `module.stripTypeScriptTypes` before it runs (types are not checked; `enum`, `namespace` with
   * values and parameter properties are refused as a `SyntaxError`). Error positions are those of
   * the TypeScript. `maxCodeBytes` counts the code as given. Default: the engine's `language`.
   */
  language?: CodeLanguage | undefined;
}

const reservedGlobals = new Set([
  'dataProxy',
  'tools',
  'reportStatus',
  'console',
  'setTimeout',
  'clearTimeout',
  'globalThis',
]);
const fn = (what: string) =>
  z.custom<(...args: never[]) => unknown>(
    (value) => typeof value === 'function',
    `expected ${what}`,
  );

/** Validates a {@link WasmModuleConfig}. */
export const WasmModuleSchema = z.strictObject({
  name: z
    .string()
    .regex(/^[A-Za-z_$][\w$]*$/, 'expected a JavaScript identifier')
    .refine((name) => !reservedGlobals.has(name), 'is a reserved global'),
  wasmPath: z.string().min(1),
  jsBindingPath: z.string().min(1).optional(),
});

const GuardSchema = z.looseObject({ name: z.string().min(1), acquire: fn('a function') });
const LoggerSchema = z.looseObject({
  debug: fn('a function'),
  info: fn('a function'),
  warn: fn('a function'),
  error: fn('a function'),
});

/** Validates a {@link SandboxEngineConfig}. */
export const EngineConfigSchema = z.strictObject({
  limits: ExecutionLimitsSchema.partial().optional(),
  maxConcurrent: z.number().int().positive().max(10_000).optional(),
  maxQueueWaitMs: z.number().int().positive().max(3_600_000).optional(),
  poolSize: z.number().int().nonnegative().max(1_000).optional(),
  isolation: z.enum(['process', 'in-process']).optional(),
  workers: z.number().int().positive().max(256).optional(),
  workerBaseMemoryMb: z.number().int().min(64).optional(),
  dataHandler: fn('a function').optional(),
  tools: ToolSetSchema.optional(),
  guards: z.array(GuardSchema).optional(),
  logger: LoggerSchema.optional(),
  telemetry: TelemetryConfigSchema.optional(),
  wasmModules: z.array(WasmModuleSchema).optional(),
  language: z.enum(['javascript', 'typescript']).optional(),
});

// 30 000 (core's default timeoutMs) ended benign co-tenants CAPACITY in the 50-killer co-tenant
// table on a loaded machine (its retries queued 33.7 s): the default leaves room for that.
const defaultMaxQueueWaitMs = 120_000;

/** The engine configuration with every default applied. */
export interface ResolvedEngineConfig {
  limits: Partial<ExecutionLimits>;
  maxConcurrent: number;
  maxQueueWaitMs: number;
  poolSize: number;
  isolation: IsolationMode;
  workers: number;
  workerBaseMemoryMb: number;
  dataHandler: DataHandler | undefined;
  tools: ToolSet;
  guards: readonly ExecutionGuard[];
  logger: Logger | undefined;
  telemetry: TelemetryConfig | undefined;
  wasmModules: readonly WasmModuleConfig[];
  language: CodeLanguage;
}

/** Validates `config` (one SandboxValidationError naming every bad field) and fills defaults. */
export function resolveEngineConfig(config: SandboxEngineConfig = {}): ResolvedEngineConfig {
  const parsed = validate(EngineConfigSchema, config, 'SandboxEngine config');
  const names = (parsed.wasmModules ?? []).map((module) => module.name);
  if (new Set(names).size !== names.length) {
    const issue = {
      path: 'wasmModules',
      message: 'names must be unique',
      received: names.join(', '),
    };
    throw new SandboxValidationError(
      `Invalid SandboxEngine config: wasmModules: ${issue.message}`,
      {
        issues: [issue],
      },
    );
  }
  return {
    limits: config.limits ?? {},
    maxConcurrent: parsed.maxConcurrent ?? 8,
    maxQueueWaitMs: parsed.maxQueueWaitMs ?? defaultMaxQueueWaitMs,
    poolSize: parsed.poolSize ?? 4,
    isolation: parsed.isolation ?? 'process',
    workers: parsed.workers ?? 2,
    workerBaseMemoryMb: parsed.workerBaseMemoryMb ?? 256,
    dataHandler: config.dataHandler,
    tools: config.tools ?? {},
    guards: config.guards ?? [],
    logger: config.logger,
    telemetry: config.telemetry,
    wasmModules: (config.wasmModules ?? []).map((module) => ({ ...module })),
    language: parsed.language ?? 'javascript',
  };
}

/** Validates the shape of a {@link SubmitRequest}. */
export const SubmitRequestSchema = z.strictObject({
  code: z.string(),
  limits: z.unknown().optional(),
  context: z
    .strictObject({
      executionId: z.string().min(1).max(65_536).optional(),
      userId: z.string().min(1).max(65_536).optional(),
      conversationId: z.string().min(1).max(65_536).optional(),
      turnId: z.string().min(1).max(65_536).optional(),
    })
    .optional(),
  signal: z.instanceof(AbortSignal).optional(),
  language: z.enum(['javascript', 'typescript']).optional(),
});

/** Validates the shape of a submit request (limits are checked by `resolveExecutionLimits`). */
export function validateSubmitRequest(request: unknown): SubmitRequest {
  return validate(SubmitRequestSchema, request, 'submit request') as SubmitRequest;
}
