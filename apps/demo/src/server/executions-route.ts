// POST /v1/executions: validate, admit through the guards (tiers 3 and 4, concurrency), run,
// and answer with the events as SSE or, for `Accept: application/json`, the terminal event.
import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import {
  acquireGuards,
  type ExecutionContext,
  type ExecutionGuard,
  type ExecutionHandle,
  type GuardLease,
  type Logger,
} from '@coda/sandbox-core';
import type { ExecutionRegistry } from './execution-registry.ts';
import type { ExecutionRequestParser } from './execution-request.ts';
import type { ExecutionRunner } from './execution-runner.ts';
import { sendJson, shuttingDown } from './http-error.ts';
import { readJsonBody } from './read-json-body.ts';
import { openEventStream, writeEvent, writeKeepAlive } from './sse.ts';

/** What the route needs; the server builds it once. */
export interface ExecutionsRouteContext {
  runner: ExecutionRunner;
  guards: readonly ExecutionGuard[];
  parseRequest: ExecutionRequestParser;
  maxBodyBytes: number;
  registry: ExecutionRegistry;
  logger: Logger;
  /** False once shutdown began: a request admitted meanwhile must not start a new execution. */
  accepting(): boolean;
}

/** Handles one POST /v1/executions. Throws `HttpError`s and sandbox refusals for the server to send. */
export async function createExecution(
  request: IncomingMessage,
  response: ServerResponse,
  route: ExecutionsRouteContext,
): Promise<void> {
  const raw = await readJsonBody(request, route.maxBodyBytes);
  const { body, userId } = route.parseRequest(raw, request.headers['x-user-id']);
  const context: ExecutionContext = { executionId: randomUUID(), userId };
  if (body.conversationId !== undefined) context.conversationId = body.conversationId;
  if (body.turnId !== undefined) context.turnId = body.turnId;

  // A client that leaves while the guards are asked (a slow Redis) should not be admitted.
  const gone = new AbortController();
  response.once('close', () => gone.abort());
  // Every guard's lease or none; a refusal throws RATE_LIMITED / BUDGET_EXHAUSTED (→ 429).
  const lease = await acquireGuards(route.guards, context, gone.signal);

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
  route.logger.info({ executionId: handle.id, userId }, 'execution admitted');

  // The client hanging up mid-run ends the execution: nobody is left to read its events.
  const hangUp = () => handle.cancel('Client disconnected');
  if (gone.signal.aborted) hangUp();
  else {
    response.once('close', () => {
      if (!response.writableFinished) hangUp();
    });
  }
  const finished = respond(request, response, handle).finally(() => release(lease, handle, route));
  route.registry.track(handle, finished);
  await finished;
}

async function respond(
  request: IncomingMessage,
  response: ServerResponse,
  handle: ExecutionHandle,
): Promise<void> {
  if (wantsJson(request)) {
    const terminal = await handle.result;
    if (!response.destroyed) sendJson(response, 200, terminal, { 'x-execution-id': handle.id });
    return;
  }
  openEventStream(response, handle.id);
  // A comment line every 15 s keeps proxies from closing a stream while code runs silently.
  const keepAlive = setInterval(() => writeKeepAlive(response), 15_000);
  try {
    for await (const event of handle) {
      if (!response.destroyed) writeEvent(response, event);
    }
  } finally {
    clearInterval(keepAlive);
  }
  response.end();
}

async function release(lease: GuardLease, handle: ExecutionHandle, route: ExecutionsRouteContext) {
  const terminal = await handle.result;
  await lease.release();
  route.logger.info(
    { executionId: handle.id, outcome: terminal.type === 'result' ? 'result' : terminal.code },
    'execution ended',
  );
}

/** SSE unless the client asks for JSON and not for an event stream. */
function wantsJson(request: IncomingMessage): boolean {
  const accept = request.headers.accept ?? '';
  return accept.includes('application/json') && !accept.includes('text/event-stream');
}
