// The demo's HTTP API on Hono: routes, the body cap and content type from the framework, one
// error shape, a log line per request, and a graceful shutdown that ends running executions before
// closing connections. This is the file to copy when wiring the sandbox into a backend; the pieces
// it calls each do one job.
import { randomUUID } from 'node:crypto';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  defaultExecutionLimits,
  type ExecutionGuard,
  type ExecutionLimits,
  ExecutionLimitsSchema,
  type Logger,
  silentLogger,
  validate,
} from '@coda/sandbox-core';
import { createAdaptorServer } from '@hono/node-server';
import { type Context, Hono } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import { methodNotAllowed } from 'hono/method-not-allowed';
import { z } from 'zod';
import { type GuardSettings, GuardSettingsSchema } from '../compose/guards.ts';
import { fieldRefusal, shuttingDown, toApiError } from './api-error.ts';
import { exampleCatalogue } from './example-catalogue.ts';
import { createExecutionRegistry } from './execution-registry.ts';
import { validateExecutionRequest } from './execution-request.ts';
import type { ExecutionRunner } from './execution-runner.ts';
import { createExecution, type ExecutionsRouteContext } from './executions-route.ts';
import { requestLog } from './request-log.ts';
import type { DemoEnv } from './server-env.ts';
import { addPageRoutes } from './static-page.ts';

/** Options of {@link createDemoServer}. */
export interface DemoServerOptions {
  /** Runs the executions: a `SandboxEngine`, adapted (see compose/isolate-engine.ts). */
  runner: ExecutionRunner;
  /** Admission checks before each execution (tiers 3 and 4, concurrency). */
  guards: readonly ExecutionGuard[];
  /**
   * The figures `guards` enforce, published on `GET /v1/limits` (and so on the page) so a user
   * knows them before meeting them; omitted: not published. Informational: the guards decide.
   */
  admission?: Readonly<GuardSettings>;
  /** Ceilings a request's `limits` may not exceed; default core's defaults. */
  maxLimits?: Readonly<ExecutionLimits>;
  /** Largest request body in bytes; default 1 MiB (room for 512 KiB of code, JSON-escaped). */
  maxBodyBytes?: number;
  /** Milliseconds shutdown waits for executions to end before closing sockets; default 5 000. */
  shutdownGraceMs?: number;
  /** Receives a line per request (refusals with their code) and per execution; pino fits. */
  logger?: Logger;
}

/** A running demo server. */
export interface DemoServer {
  readonly server: Server;
  /** Executions in flight. */
  readonly running: number;
  /** Starts listening; resolves with the bound address (port 0 picks a free one). */
  listen(port: number, host?: string): Promise<AddressInfo>;
  /**
   * Graceful shutdown: refuses new requests with 503, cancels running executions (their streams
   * end with a `CANCELLED` event), waits for them, then closes every connection.
   */
  close(): Promise<void>;
}

const hasMethods = (value: unknown, methods: readonly string[]) =>
  typeof value === 'object' &&
  value !== null &&
  methods.every((method) => typeof (value as Record<string, unknown>)[method] === 'function');

const DemoServerOptionsSchema = z.strictObject({
  runner: z.custom<ExecutionRunner>(
    (value) => hasMethods(value, ['submit']),
    'expected a runner with submit(), such as a SandboxEngine',
  ),
  guards: z.array(
    z.custom<ExecutionGuard>(
      (value) => hasMethods(value, ['acquire']),
      'expected an ExecutionGuard',
    ),
  ),
  admission: GuardSettingsSchema.optional(),
  maxLimits: ExecutionLimitsSchema.optional(),
  maxBodyBytes: z
    .number()
    .int()
    .min(1_024)
    .max(64 * 1_048_576)
    .optional(),
  shutdownGraceMs: z.number().int().nonnegative().max(600_000).optional(),
  logger: z
    .custom<Logger>(
      (value) => hasMethods(value, ['debug', 'info', 'warn', 'error']),
      'expected a logger with debug, info, warn and error methods',
    )
    .optional(),
});

/**
 * Creates the server; nothing listens until {@link DemoServer.listen}. Throws a
 * `SandboxValidationError` naming each bad option.
 */
export async function createDemoServer(options: DemoServerOptions): Promise<DemoServer> {
  const settings = validate(DemoServerOptionsSchema, options, 'demo server options');
  const logger = settings.logger ?? silentLogger;
  const maxLimits = settings.maxLimits ?? defaultExecutionLimits;
  const maxBodyBytes = settings.maxBodyBytes ?? 1_048_576;
  const registry = createExecutionRegistry();
  let closing: Promise<void> | undefined;
  const route: ExecutionsRouteContext = {
    runner: settings.runner,
    guards: settings.guards,
    registry,
    logger,
    accepting: () => closing === undefined,
  };

  const app = new Hono<DemoEnv>();
  app.use(requestLog(logger));
  app.use(async (_c, next) => {
    if (closing !== undefined) throw shuttingDown();
    await next();
  });
  app.use(
    methodNotAllowed({
      app,
      onMethodNotAllowed: (c, methods) => {
        const allow = methods.join(', ');
        const field = { path: 'method', message: `use ${allow}`, received: c.req.method };
        return sendError(c, fieldRefusal(405, field, { allow }, { allow }));
      },
    }),
  );
  app.onError((error, c) => sendError(c, error));
  app.notFound((c) => {
    const field = { path: 'path', message: 'no such route', received: c.req.path };
    return sendError(c, fieldRefusal(404, field));
  });

  app.post(
    '/v1/executions',
    (c, next) => {
      // An id from the start, so that even a refusal is logged (and answered) with one.
      const executionId = randomUUID();
      c.set('executionId', executionId);
      c.header('x-execution-id', executionId);
      return next();
    },
    requireJsonBody,
    bodyLimit({ maxSize: maxBodyBytes, onError: () => tooLarge(maxBodyBytes) }),
    validateExecutionRequest(maxLimits),
    (c) => createExecution(c, c.req.valid('json'), route),
  );
  app.get('/healthz', (c) => c.json({ status: 'ok', running: registry.size }, 200, noStore));
  const catalogue = exampleCatalogue();
  app.get('/v1/examples', (c) => c.json(catalogue, 200, noStore));
  const limits = { admission: settings.admission ?? null, execution: maxLimits, maxBodyBytes };
  app.get('/v1/limits', (c) => c.json(limits, 200, noStore));
  // Read once: an engine's tools are fixed when it is created.
  const tools = {
    declarations: settings.runner.toolDeclarations?.() ?? 'declare const tools: {};',
  };
  app.get('/v1/tools', (c) => c.json(tools, 200, noStore));
  addPageRoutes(app);

  const server = createAdaptorServer({ fetch: app.fetch }) as Server;
  // Slow clients cannot hold a connection open by trickling headers or a body (slowloris); a
  // response stream may last as long as its execution.
  server.headersTimeout = 10_000;
  server.requestTimeout = 30_000;

  async function shutdown(): Promise<void> {
    server.close();
    registry.cancelAll('Server shutting down');
    let timer: NodeJS.Timeout | undefined;
    const graceOver = new Promise((resolve) => {
      timer = setTimeout(resolve, settings.shutdownGraceMs ?? 5_000);
    });
    await Promise.race([registry.drained(), graceOver]);
    clearTimeout(timer);
    server.closeIdleConnections();
    server.closeAllConnections();
  }

  return {
    server,
    get running() {
      return registry.size;
    },
    listen(port, host = '127.0.0.1') {
      return new Promise((resolve, reject) => {
        server.once('error', reject);
        server.listen(port, host, () => {
          server.off('error', reject);
          resolve(server.address() as AddressInfo);
        });
      });
    },
    close() {
      closing ??= shutdown();
      return closing;
    },
  };
}

const noStore = { 'cache-control': 'no-store' };

/** Sends `thrown` in the one error shape, and notes its code for the request's log line. */
function sendError(c: Context<DemoEnv>, thrown: unknown): Response {
  const { status, body, headers, cause } = toApiError(thrown);
  c.set('refusal', cause.code);
  return c.json(body, status, { ...noStore, ...headers });
}

/** 415 unless the body is declared as JSON: the validator would otherwise see an empty body. */
const requireJsonBody = async (c: Context<DemoEnv>, next: () => Promise<void>) => {
  const type = c.req.header('content-type') ?? '';
  if (!/^application\/json\s*(;|$)/i.test(type)) {
    const field = { path: 'headers.content-type', message: 'send the body as application/json' };
    throw fieldRefusal(415, { ...field, received: JSON.stringify(type.slice(0, 80)) });
  }
  await next();
};

function tooLarge(maxBytes: number): never {
  // Connection: close, because the rest of an oversized upload is not read.
  const field = { path: 'body', message: `larger than ${maxBytes} bytes`, received: '[body]' };
  throw fieldRefusal(413, field, { maxBytes }, { connection: 'close' });
}
