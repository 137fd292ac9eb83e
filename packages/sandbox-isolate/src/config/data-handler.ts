// What answers `dataProxy.request` and a tool call: the handler's type and what it learns. Its own
// file, so the engine's config and the tools' config both use it without importing each other.
import type { ExecutionContext, JsonValue } from '@coda/sandbox-core';

/** What a data handler learns about the request it answers. */
export interface DataRequestInfo {
  /** The execution that asked (its id, and user, conversation, turn when given). */
  context: ExecutionContext;
  /** 1 for the execution's first request, 2 for the second, ... */
  index: number;
  /** Aborts when the execution ends (timeout, cancel, limit): stop work then. */
  signal: AbortSignal;
}

/**
 * Answers `await dataProxy.request(params)` calls from user code. Its return value is sent back
 * as JSON (counted against `maxDataBytes`). A throw rejects the call in user code with the
 * error's message (host paths removed).
 */
export type DataHandler = (params: JsonValue, info: DataRequestInfo) => unknown;
