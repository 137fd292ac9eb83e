export {
  type ConfinementMode,
  ConfinementModeSchema,
  hostDefaults,
  type ParserHostLookup,
  type ParserHostOptions,
  ParserHostOptionsSchema,
  type ParserRuntime,
  ParserRuntimeSchema,
  type ProcessModel,
  ProcessModelSchema,
  type ResolvedHostSettings,
  type RunParserOptions,
  RunParserOptionsSchema,
} from './host/options.ts';
export {
  createParserHost,
  type ParserHost,
} from './host/parser-host.ts';
export type {
  ParserFailure,
  ParserResult,
  ParserResultFields,
  ParserSuccess,
} from './host/result.ts';
export { resultMemoryFactor } from './protocol/json-cost.ts';
export {
  ParserRequestSchema,
  ParserResponseSchema,
  parserRequestJsonSchema,
  parserResponseJsonSchema,
  ResponseErrorKindSchema,
} from './protocol/schemas.ts';
export {
  type ParserRequest,
  type ParserResponse,
  protocolVersion,
  type ResponseErrorKind,
} from './protocol/wire.ts';
export type { ConfinementReport } from './spawn/child.ts';
export { heapLimitMiB } from './spawn/node-command.ts';
export { minimumPythonVersion } from './spawn/python-interpreter.ts';
