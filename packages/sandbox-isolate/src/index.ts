// The tag names this entry's API page: typedoc names entries after their export keys, and `.`
// would leave the page without a name.
/**
 * The engine, its options and the parts it is built from; tools from an MCP client are in
 * `@coda/sandbox-isolate/mcp`.
 * @module @coda/sandbox-isolate
 */
export type { BridgeLimit } from './bridge/limit-errors.ts';
export type { DataHandler, DataRequestInfo } from './config/data-handler.ts';
export type {
  IsolationMode,
  SandboxEngineConfig,
  SubmitRequest,
} from './config/engine-config.ts';
export {
  inProcessWarning,
  SandboxEngine,
  type SandboxEngineStats,
} from './engine/sandbox-engine.ts';
export { CodeExecutor } from './isolate/code-executor.ts';
export {
  ContextBuilder,
  type ContextBuilderOptions,
  type IsolateRunFunction,
  type PreparedIsolate,
} from './isolate/context-builder.ts';
export { ExecutionTimers, type TimerAnswer } from './isolate/execution-timers.ts';
export { IsolateManager, type IsolateManagerOptions } from './isolate/isolate-manager.ts';
export type {
  DataAnswer,
  ExecutionJob,
  IsolateStats,
  JobHost,
  JobOutcome,
  ParamsRefusal,
  SynchronousStart,
} from './isolate/job.ts';
export type { CodeLanguage } from './isolate/typescript-input.ts';
export type { CodeLocation } from './isolate/user-code-location.ts';
export type { LoadedWasmModule, WasmModuleConfig } from './isolate/wasm-modules.ts';
export type { TelemetryConfig } from './telemetry/telemetry-config.ts';
export {
  createFetchTool,
  type FetchToolLookup,
  type FetchToolOptions,
  type FetchToolResponse,
} from './tools/fetch-tool.ts';
export { defineTool, type ToolDefinition, type ToolSet } from './tools/tool-config.ts';
