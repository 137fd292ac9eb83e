export { jsonByteLength, utf8ByteLength } from './bytes/byte-length.ts';
export { isSandboxErrorCode, SandboxErrorCode } from './errors/codes.ts';
export {
  type RetryableErrorOptions,
  SandboxBudgetExhaustedError,
  SandboxCancelledError,
  SandboxCapacityError,
  SandboxCrashError,
  SandboxLimitExceededError,
  SandboxOOMError,
  SandboxRateLimitedError,
  SandboxRuntimeError,
  SandboxTimeoutError,
  SandboxUnavailableError,
  SandboxValidationError,
  type ValidationIssue,
} from './errors/error-classes.ts';
export {
  isSandboxError,
  SandboxError,
  type SandboxErrorJSON,
  type SandboxErrorOptions,
} from './errors/sandbox-error.ts';
export { sandboxErrorFromJSON, toSandboxErrorJSON } from './errors/serialize.ts';
export type {
  ErrorEvent,
  ExecutionStats,
  ResultEvent,
  SandboxEvent,
  StatusEvent,
  StatusLevel,
  TerminalEvent,
} from './events/events.ts';
export { isTerminalEvent } from './events/events.ts';
export {
  createExecutionChannel,
  type ExecutionChannel,
  type ExecutionHandle,
} from './events/execution-handle.ts';
export {
  acquireGuards,
  type ExecutionContext,
  ExecutionContextSchema,
  type ExecutionGuard,
  type GuardLease,
} from './guards/execution-guard.ts';
export { type JsonMeasureRefusal, measureJson } from './json/json-measure.ts';
export type { JsonObject, JsonValue } from './json-value.ts';
export {
  type BridgeLimits,
  BridgeLimitsSchema,
  defaultBridgeLimits,
  defaultExecutionLimits,
  defaultIsolateLimits,
  type ExecutionLimits,
  ExecutionLimitsSchema,
  type IsolateLimits,
  IsolateLimitsSchema,
  resolveExecutionLimits,
} from './limits/execution-limits.ts';
export {
  defaultParserLimits,
  type ParserLimits,
  ParserLimitsSchema,
  resolveParserLimits,
} from './limits/parser-limits.ts';
export {
  defaultSandboxPolicy,
  resolveSandboxPolicy,
  type SandboxPolicy,
  SandboxPolicySchema,
} from './limits/sandbox-policy.ts';
export { describeValue, describeZodIssue, validate } from './limits/validate.ts';
export { type Logger, type LogMethod, silentLogger } from './logging/logger.ts';
export {
  type AddressClass,
  classifyAddress,
  neverClasses,
  privateClasses,
} from './network/address-class.ts';
export { type Admission, admitDestination, type NetworkLookup } from './network/admit.ts';
export { hostLocalAddresses } from './network/host-addresses.ts';
export { formatHostPattern, type HostPattern, parseHostPattern } from './network/host-pattern.ts';
export {
  formatIpAddress,
  type IpAddress,
  type IpRange,
  inRange,
  parseIpAddress,
  parseIpRange,
  unmapIpv4,
} from './network/ip-address.ts';
export {
  type NetworkAllowedEntry,
  type NetworkDenialReason,
  type NetworkDeniedEntry,
  type NetworkEvent,
  type NetworkPolicy,
  NetworkPolicySchema,
  type NetworkReport,
} from './network/network-policy.ts';
export { type Destination, NetworkRules, type NetworkVerdict } from './network/network-rules.ts';
export { holdProxyListenerPort, isProxyListener } from './network/proxy-listeners.ts';
export { systemLookup } from './network/system-lookup.ts';
