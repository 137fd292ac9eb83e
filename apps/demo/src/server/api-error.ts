// One error shape for every refusal the API makes: `{ error: SandboxErrorJSON }`, core's code,
// message and details, so a client switches on the same codes whether the HTTP layer refused the
// request or the sandbox ended the execution. The status comes from the code, or from the
// refusal when one code has several (VALIDATION is 400, 404, 405, 413 or 415).
import {
  isSandboxError,
  SandboxCrashError,
  type SandboxError,
  type SandboxErrorCode,
  type SandboxErrorJSON,
  SandboxUnavailableError,
  SandboxValidationError,
} from '@coda/sandbox-core';
import { HTTPException } from 'hono/http-exception';
import type { ContentfulStatusCode } from 'hono/utils/http-status';

/** The body of every error response. */
export interface ApiErrorBody {
  error: SandboxErrorJSON;
}

/** An error response ready to send: status, body and extra headers. */
export interface ApiError {
  status: ContentfulStatusCode;
  body: ApiErrorBody;
  headers: Record<string, string>;
  /** The sandbox error behind it, for the log. */
  cause: SandboxError;
}

/**
 * A refusal with its own status: thrown by request handling, sent by the server's error handler.
 * A subclass of Hono's `HTTPException`, so the framework's own refusals take the same path.
 */
export class ApiRefusal extends HTTPException {
  readonly error: SandboxError;
  readonly headers: Readonly<Record<string, string>>;

  constructor(
    status: ContentfulStatusCode,
    error: SandboxError,
    headers: Readonly<Record<string, string>> = {},
  ) {
    super(status, { message: error.message, cause: error });
    this.error = error;
    this.headers = headers;
  }
}

/** Statuses of the sandbox refusals that happen before an execution starts. */
const statusByCode: Partial<Record<SandboxErrorCode, ContentfulStatusCode>> = {
  VALIDATION: 400,
  RATE_LIMITED: 429,
  BUDGET_EXHAUSTED: 429,
  CAPACITY: 503,
  UNAVAILABLE: 503,
};

/**
 * A VALIDATION refusal naming one field: what the page highlights and a client reads in
 * `details.issues`, the same shape as a 400 for bad fields.
 */
export function fieldRefusal(
  status: ContentfulStatusCode,
  field: { path: string; message: string; received: string },
  details: SandboxErrorJSON['details'] = {},
  headers: Readonly<Record<string, string>> = {},
): ApiRefusal {
  const error = new SandboxValidationError(`${field.path || 'body'}: ${field.message}`, {
    issues: [field],
    details,
  });
  return new ApiRefusal(status, error, headers);
}

/** 503 for requests that arrive (or finish admission) after shutdown began. */
export function shuttingDown(): ApiRefusal {
  return new ApiRefusal(503, new SandboxUnavailableError('Server is shutting down'), {
    connection: 'close',
  });
}

/**
 * Turns anything thrown while handling a request into the response: a refusal as it is; a
 * sandbox error (zod validation, a guard) with its code's status and `Retry-After` (whole seconds,
 * rounded up) when it says when to come back; one of Hono's own exceptions (malformed JSON) as
 * VALIDATION; anything else a 500 CRASH that says nothing internal.
 */
export function toApiError(thrown: unknown): ApiError {
  if (thrown instanceof ApiRefusal) return build(thrown.status, thrown.error, thrown.headers);
  if (isSandboxError(thrown)) {
    const status = statusByCode[thrown.code];
    if (status !== undefined) return build(status, thrown, retryAfter(thrown));
  } else if (thrown instanceof HTTPException && thrown.status < 500) {
    const field = { path: '', message: thrown.message, received: '[body]' };
    return build(thrown.status as ContentfulStatusCode, fieldRefusal(400, field).error);
  }
  return build(500, new SandboxCrashError('Internal server error'));
}

function build(
  status: ContentfulStatusCode,
  error: SandboxError,
  headers: Readonly<Record<string, string>> = {},
): ApiError {
  return { status, body: { error: error.toJSON() }, headers: { ...headers }, cause: error };
}

function retryAfter(error: SandboxError): Record<string, string> {
  const ms = error.details?.retryAfterMs;
  return typeof ms === 'number'
    ? { 'retry-after': String(Math.max(1, Math.ceil(ms / 1_000))) }
    : {};
}
