// The result of one `runParser` call: the outcome, a code and the confinement that applied.
import type { JsonValue, NetworkReport, SandboxErrorCode } from '@coda/sandbox-core';
import type { ConfinementReport } from '../spawn/child.ts';

/** What every result says, whether the call succeeded or not. */
export interface ParserResultFields {
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
  /**
   * With a `network` allowlist: the hosts the call's child reached through the egress proxy
   * (`allowed`: host, port, bytes) and the connections the proxy refused (`denied`: host, port,
   * reason), on a success and on a failure alike. The child serves this one call, so this is
   * the call's traffic (a warm spare's includes what the module did while it loaded). Absent
   * without an allowlist, or when no child ran.
   */
  network?: NetworkReport;
}

/** The parser returned and its result arrived intact. */
export interface ParserSuccess<Data = JsonValue> extends ParserResultFields {
  /** Always `true`: the discriminant of {@link ParserResult}. */
  ok: true;
  /** The parser's return value, as JSON (`undefined` arrives as `null`). */
  data: Data;
  /** Never set on a success. */
  error?: never;
  /** Never set on a success. */
  code?: never;
}

/** The call failed: the parser threw, a limit ended it, the child crashed, or it never ran. */
export interface ParserFailure extends ParserResultFields {
  /** Always `false`: the discriminant of {@link ParserResult}. */
  ok: false;
  /** Why the call failed: the parser's error message, or what the host saw. */
  error: string;
  /**
   * The kind of failure, from core's error code table: `RUNTIME` (the parser threw or failed to
   * load), `VALIDATION` (bad input, an unknown parser, a result that is not JSON or too large),
   * `TIMEOUT` (wall clock or CPU), `OOM`, `CANCELLED`, `CAPACITY` (queue full), `CRASH` (the child
   * died or sent a bad response), `UNAVAILABLE` (confinement `required` and not available).
   */
  code: SandboxErrorCode;
  /** Never set on a failure. */
  data?: never;
}

/**
 * What `runParser` resolves to: narrows on `ok` (`if (result.ok) result.data`, else
 * `result.code`). It never rejects: timeouts, crashes, bad output and bad input are all
 * failures with an `error` message and a `code`.
 */
export type ParserResult<Data = JsonValue> = ParserSuccess<Data> | ParserFailure;

/** A failed result for a call that never reached a child (bad input, full queue, cancelled). */
export function refusedResult(
  code: SandboxErrorCode,
  error: string,
  durationMs = 0,
): ParserFailure {
  return { ok: false, error, code, timedOut: false, exitCode: null, durationMs, stderr: '' };
}
