// The byte-level constants of the parser protocol, shared by the host and the Node runner.
// The runner loads this file under Node's permission model, so it imports nothing.

/** Version of the protocol; the request's `v` field. */
export const protocolVersion = 1;

/** Bytes of the per-call secret that opens the request and the response frame. */
export const nonceBytes = 32;

/** Bytes of the big-endian length that follows the nonce in both directions. */
export const lengthBytes = 4;

/**
 * The length of the ready notice: a frame with an empty body, which a runner writes once the
 * parser module has loaded and it waits for the request. A response body is never empty.
 */
export const readyLength = 0;

/** The child's file descriptor that carries the response (stdin, stdout, stderr, then this). */
export const responseFd = 3;

/** Exit codes of the runner, after it has written its response (or failed to read a request). */
export const runnerExitCode = Object.freeze({
  /** The parser returned; the response is `{ ok: true }`. */
  ok: 0,
  /** The response is `{ ok: false }`: the parser threw, is unknown, or its result was refused. */
  error: 1,
  /** The request could not be read; no response was written. */
  badRequest: 2,
});

/** Why a response is `{ ok: false }`: the `kind` field of an error response. */
export type ResponseErrorKind =
  | 'parser-error'
  | 'unknown-parser'
  | 'load-error'
  | 'invalid-result'
  | 'result-too-large'
  | 'never-settled'
  | 'memory-exceeded'
  | 'invalid-payload';

/** What the host writes on the child's stdin after the nonce and length. */
export interface ParserRequest {
  /** Protocol version, {@link protocolVersion}. */
  v: typeof protocolVersion;
  /** Name of the exported function to call. */
  parser: string;
  /** The payload, passed as the function's first argument. */
  payload: unknown;
  /** Passed as the function's second argument. */
  kwargs: Record<string, unknown>;
  /** The call's limits; the runner uses `maxOutputBytes` to refuse an oversized result early. */
  limits: {
    /** Wall-clock limit in milliseconds (the host enforces it). */
    timeout: number;
    /** Memory limit in bytes (the host enforces it). */
    memoryBytes: number;
    /** CPU-time limit in whole seconds (RLIMIT_CPU, set before the runner starts). */
    cpuSecs: number;
    /** Largest response body in UTF-8 bytes; the runner refuses a larger result itself. */
    maxOutputBytes: number;
  };
}

/** What the runner writes in its response frame. */
export type ParserResponse =
  | {
      /** The parser returned. */
      ok: true;
      /** What it returned, as JSON. */
      data: unknown;
    }
  | {
      /** The parser threw, is unknown, or its result was refused. */
      ok: false;
      /** The error's message, or why the result was refused. */
      error: string;
      /** Which of those it was. */
      kind: ResponseErrorKind;
    };
