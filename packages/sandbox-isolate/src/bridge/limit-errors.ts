// The errors of a tier 2 bridge limit, built in one place for both sides that enforce them: the
// isolate's side (a breach the bootstrap reports, final at once) and the host's session (the
// second line, for a worker it does not trust). Built from the limit, its value and a count only.
import { type ExecutionLimits, SandboxErrorCode, type SandboxErrorJSON } from '@coda/sandbox-core';
import { maxValidatedInputValues } from '../tools/tool-input-validation.ts';
import { maxJsonDepth } from './safe-json.ts';

/** A tier 2 limit of the bridge a call can pass; `depth` is the fixed nesting depth. */
export type BridgeLimit =
  | 'maxDataRequests'
  | 'maxRequestBytes'
  | 'maxRequestValues'
  | 'maxDataBytes'
  | 'depth'
  | 'toolInputValues';

/** Every {@link BridgeLimit}: what the host accepts from the isolate side. */
export const bridgeLimits: ReadonlySet<string> = new Set<BridgeLimit>([
  'maxDataRequests',
  'maxRequestBytes',
  'maxRequestValues',
  'maxDataBytes',
  'depth',
]);

/**
 * The error ending an execution whose call `label` (`dataProxy.request` or `tools.NAME`) passed
 * `limit`; `size` is the count that passed it (a lower bound when the isolate measured it).
 */
export function bridgeLimitError(
  limit: BridgeLimit,
  limits: ExecutionLimits,
  size: number,
  label: string,
): SandboxErrorJSON {
  const tool = label !== 'dataProxy.request';
  const what = tool ? `${label} input` : 'dataProxy.request params';
  switch (limit) {
    case 'depth':
      return {
        name: 'SandboxValidationError',
        code: SandboxErrorCode.VALIDATION,
        message: `${what} are nested deeper than ${maxJsonDepth} levels`,
        details: { field: tool ? 'input' : 'params', limit: maxJsonDepth },
      };
    case 'maxDataRequests':
      return limitExceeded(
        limit,
        limits.maxDataRequests,
        size,
        tool
          ? `${label}: more than maxDataRequests (${limits.maxDataRequests}) data requests and tool calls`
          : `dataProxy.request called more than maxDataRequests (${limits.maxDataRequests}) times`,
      );
    case 'maxRequestValues':
      return limitExceeded(
        limit,
        limits.maxRequestValues,
        limits.maxRequestValues + 1,
        `${what} hold more than maxRequestValues (${limits.maxRequestValues}) values`,
      );
    case 'maxRequestBytes':
      return limitExceeded(
        limit,
        limits.maxRequestBytes,
        Math.max(size, limits.maxRequestBytes + 1),
        `${what} are over maxRequestBytes (${limits.maxRequestBytes} bytes)`,
      );
    case 'toolInputValues':
      return limitExceeded(
        limit,
        maxValidatedInputValues,
        maxValidatedInputValues + 1,
        `${what} hold more than ${maxValidatedInputValues} values, the most a tool with an input schema takes`,
      );
    case 'maxDataBytes':
      return limitExceeded(
        limit,
        limits.maxDataBytes,
        Math.max(size, limits.maxDataBytes + 1),
        `Data crossing the bridge exceeded maxDataBytes (${limits.maxDataBytes} bytes)`,
      );
  }
}

function limitExceeded(
  field: string,
  limit: number,
  size: number,
  message: string,
): SandboxErrorJSON {
  return {
    name: 'SandboxLimitExceededError',
    code: SandboxErrorCode.LIMIT_EXCEEDED,
    message,
    details: { field, limit, size },
  };
}

/** The OOM of a data answer refused because the isolate's heap has no room for it. */
export function answerTooBigForHeap(memoryMb: number, units: number): SandboxErrorJSON {
  return {
    name: 'SandboxOOMError',
    code: SandboxErrorCode.OOM,
    message: `A data answer of ${units} characters does not fit in the memory limit of ${memoryMb} MiB; it was refused before it was copied in`,
    details: { memoryMb, answerUnits: units },
  };
}
