// POST /v1/executions: admit through the guards (tiers 3 and 4, concurrency), run, and answer
// with the events as Server-Sent Events or, for `Accept: application/json`, the terminal event.
// The body, the user and the execution id were settled by the middleware before this runs.
import {
  acquireGuards,
  type ExecutionContext,
  type ExecutionGuard,
  type ExecutionHandle,
  type GuardLease,
  type Logger,
} from '@coda/sandbox-core';
import type { Context } from 'hono';
import { streamSSE } from 'hono/streaming';
import { shuttingDown } from './api-error.ts';
import type { ExecutionRegistry } from './execution-registry.ts';
import type { ExecutionRequestBody } from './execution-request.ts';
import type { ExecutionRunner } from './execution-runner.ts';
import type { DemoEnv } from './server-env.ts';

/** What the route needs; the server builds it once. */
export interface ExecutionsRouteContext {
  runner: ExecutionRunner;
  guards: readonly ExecutionGuard[];
  registry: ExecutionRegistry;
  logger: Logger;
  /** False once shutdown began: a request admitted meanwhile must not start a new execution. */
  accepting(): boolean;
}

/** A comment line this often keeps proxies from closing a stream while code runs silently. */
const keepAliveMs = 15_000;

/** Handles one valid POST /v1/executions. Throws sandbox refusals for the error handler. */
export async function createExecution(
  c: Context<DemoEnv>,
  body: ExecutionRequestBody,
  route: ExecutionsRouteContext,
): Promise<Response> {
  const context: ExecutionContext = { executionId: c.get('executionId'), userId: c.get('userId') };
  if (body.conversationId !== undefined) context.conversationId = body.conversationId;
  if (body.turnId !== undefined) context.turnId = body.turnId;

  // Aborted by @hono/node-server when the client hangs up: while the guards are asked (a slow
  // Redis) it stops admission; once running it ends the execution, nobody is left to read it.
  const gone = c.req.raw.signal;
  // Every guard's lease or none; a refusal throws RATE_LIMITED / BUDGET_EXHAUSTED (→ 429).
  const lease = await acquireGuards(route.guards, context, gone);
  let handle: ExecutionHandle;
  try {
    if (!route.accepting()) throw shuttingDown();
    handle = route.runner.submit({
      code: body.code,
      ...(body.limits === undefined ? {} : { limits: body.limits }),
      context,
    });
  } catch (error) {
    await lease.release();
    throw error;
  }
  route.logger.info({ executionId: handle.id, userId: context.userId }, 'execution admitted');
  const hangUp = () => handle.cancel('Client disconnected');
  if (gone.aborted) hangUp();
  else gone.addEventListener('abort', hangUp, { once: true });

  let responded: () => void = () => {};
  const sent = new Promise<void>((resolve) => {
    responded = resolve;
  });
  const finished = Promise.all([handle.result, sent]).finally(() =>
    release(lease, handle, context, route),
  );
  route.registry.track(handle, finished);

  if (wantsJson(c.req.header('accept'))) {
    const terminal = await handle.result;
    responded();
    return c.json(terminal, 200, { 'cache-control': 'no-store' });
  }
  // Proxies such as nginx buffer responses unless told not to; events must arrive live.
  c.header('x-accel-buffering', 'no');
  return streamSSE(c, async (stream) => {
    const keepAlive = setInterval(() => void stream.write(': keep-alive\n\n'), keepAliveMs);
    try {
      for await (const event of handle) {
        if (!stream.aborted)
          await stream.writeSSE({ event: event.type, data: JSON.stringify(event) });
      }
    } finally {
      clearInterval(keepAlive);
      responded();
    }
  });
}

async function release(
  lease: GuardLease,
  handle: ExecutionHandle,
  context: ExecutionContext,
  route: ExecutionsRouteContext,
): Promise<void> {
  const terminal = await handle.result;
  await lease.release();
  route.logger.info(
    {
      executionId: handle.id,
      userId: context.userId,
      outcome: terminal.type === 'result' ? 'result' : terminal.code,
      wallMs: terminal.stats?.wallMs,
    },
    'execution ended',
  );
}

/** SSE unless the client asks for JSON and not for an event stream. */
function wantsJson(accept: string | undefined = ''): boolean {
  return accept.includes('application/json') && !accept.includes('text/event-stream');
}
