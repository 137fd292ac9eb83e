// The result of one `runParser` call: seed 004's SandboxResult, plus a code and the confinement.
import type { JsonValue, SandboxErrorCode } from '@coda/sandbox-core';
import type { ConfinementReport } from '../spawn/child.ts';

/**
 * What `runParser` resolves to. It never rejects: timeouts, crashes, bad output and bad input
 * are all results with `ok: false`, an `error` message and a `code`.
 */
export interface ParserResult<Data = JsonValue> {
  /** Whether the parser returned and its result arrived intact. */
  ok: boolean;
  /** The parser's return value (`null` for `undefined`), when `ok`. */
  data?: Data;
  /** Why the call failed, when not `ok`: the parser's error message, or what the host saw. */
  error?: string;
  /** The kind of failure, from core's error code table, when not `ok`. */
  code?: SandboxErrorCode;
  /** Whether the wall-clock limit ended the call (`error` is then `sandbox timeout`). */
  timedOut: boolean;
  /** The child's exit code; null when a signal ended it or no child ran. */
  exitCode: number | null;
  /** The signal that ended the child, if one did. */
  signal?: NodeJS.Signals;
  /** Milliseconds from the call's start (after any queueing) to its result. */
  durationMs: number;
  /** The child's console output (stdout and stderr as they arrived), capped at `maxStderrBytes`. */
  stderr: string;
  /** What confined the child; absent when the call was refused before a child ran. */
  confinement?: ConfinementReport;
}

/** A failed result for a call that never reached a child (bad input, full queue, cancelled). */
export function refusedResult(
  code: SandboxErrorCode,
  error: string,
  durationMs = 0,
): ParserResult<never> {
  return { ok: false, error, code, timedOut: false, exitCode: null, durationMs, stderr: '' };
}
