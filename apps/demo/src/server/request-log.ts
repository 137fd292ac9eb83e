// One log line per request, refusals included: method, path, status, time, the user and the
// execution id, and for a refusal its code — what an operator greps for when a user says "it
// said no". Levels: info for answers, warn for refusals (4xx), error for failures (5xx).
import type { Logger, SandboxErrorCode } from '@coda/sandbox-core';
import type { MiddlewareHandler } from 'hono';
import type { DemoEnv } from './server-env.ts';

/** Longest `x-user-id` copied into a log line: the header is the client's and unchecked here. */
const maxLoggedUserId = 256;

/** Middleware that logs each request once it has its response. */
export function requestLog(logger: Logger): MiddlewareHandler<DemoEnv> {
  return async (c, next) => {
    const started = performance.now();
    await next();
    const { status } = c.res;
    const code: SandboxErrorCode | undefined = c.get('refusal');
    const fields = {
      method: c.req.method,
      path: c.req.path,
      status,
      ms: Math.round(performance.now() - started),
      userId: c.get('userId') ?? c.req.header('x-user-id')?.trim().slice(0, maxLoggedUserId),
      executionId: c.get('executionId'),
      ...(code === undefined ? {} : { code }),
    };
    if (status >= 500) logger.error(fields, 'request failed');
    else if (status >= 400) logger.warn(fields, 'request refused');
    else logger.info(fields, 'request');
  };
}
