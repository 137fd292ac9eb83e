// One JSON error shape for every refusal the API makes: `{ error: { code, message, details? } }`,
// where `code` is core's error code when a sandbox layer refused, or an HTTP-level code otherwise.
import type { ServerResponse } from 'node:http';
import { isSandboxError, type JsonObject, type SandboxError } from '@coda/sandbox-core';

/** The body of every error response. */
export interface ApiErrorBody {
  error: { code: string; message: string; details?: JsonObject };
}

/** An error that ends a request with `status`; thrown by request handling, sent by the server. */
export class HttpError extends Error {
  readonly status: number;
  readonly body: ApiErrorBody;
  readonly headers: Readonly<Record<string, string>>;

  constructor(
    status: number,
    error: ApiErrorBody['error'],
    headers: Readonly<Record<string, string>> = {},
  ) {
    super(error.message);
    this.name = 'HttpError';
    this.status = status;
    this.body = { error };
    this.headers = headers;
  }
}

/** Status codes for the sandbox refusals that happen before an execution starts. */
const statusByCode: Partial<Record<SandboxError['code'], number>> = {
  VALIDATION: 400,
  RATE_LIMITED: 429,
  BUDGET_EXHAUSTED: 429,
  CAPACITY: 503,
  UNAVAILABLE: 503,
};

/**
 * Turns a refusal from a sandbox layer (zod validation, a guard) into an HTTP error: 400 naming
 * each bad field, 429 with `Retry-After` (whole seconds, rounded up) when a limit says when to
 * come back, 503 when a dependency is down. Anything else is a 500 that says nothing internal.
 */
export function toHttpError(error: unknown): HttpError {
  if (error instanceof HttpError) return error;
  if (!isSandboxError(error)) {
    return new HttpError(500, { code: 'INTERNAL', message: 'Internal server error' });
  }
  const json = error.toJSON();
  const retryAfterMs = json.details?.retryAfterMs;
  const headers: Record<string, string> =
    typeof retryAfterMs === 'number'
      ? { 'retry-after': String(Math.max(1, Math.ceil(retryAfterMs / 1_000))) }
      : {};
  return new HttpError(statusByCode[error.code] ?? 500, toErrorBody(json), headers);
}

function toErrorBody(json: ReturnType<SandboxError['toJSON']>): ApiErrorBody['error'] {
  const body: ApiErrorBody['error'] = { code: json.code, message: json.message };
  if (json.details !== undefined) body.details = json.details;
  return body;
}

/** Writes `body` as JSON with `status` and `headers`. */
export function sendJson(
  response: ServerResponse,
  status: number,
  body: unknown,
  headers: Readonly<Record<string, string>> = {},
): void {
  const text = JSON.stringify(body);
  response.writeHead(status, {
    'content-type': 'application/json; charset=utf-8',
    'content-length': Buffer.byteLength(text),
    'cache-control': 'no-store',
    ...headers,
  });
  response.end(text);
}

/** Sends `error` as its status and JSON body. */
export function sendError(response: ServerResponse, error: HttpError): void {
  if (response.headersSent) {
    response.destroy();
    return;
  }
  sendJson(response, error.status, error.body, error.headers);
}

/** 503 for requests that arrive (or finish admission) after shutdown began. */
export function shuttingDown(): HttpError {
  return new HttpError(
    503,
    { code: 'SHUTTING_DOWN', message: 'Server is shutting down' },
    { connection: 'close' },
  );
}
