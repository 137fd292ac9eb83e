// The demo's HTTP server on node:http: routes, error mapping, health, and a graceful shutdown
// that ends running executions before closing connections. This is the file to copy when wiring
// the sandbox into a backend; the pieces it calls each do one job.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
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
import { z } from 'zod';
import { isolateAttacks } from '../attacks/isolate-attacks.ts';
import { examples } from '../snippets/examples.ts';
import { createExecutionRegistry } from './execution-registry.ts';
import { createExecutionRequestParser } from './execution-request.ts';
import type { ExecutionRunner } from './execution-runner.ts';
import { createExecution, type ExecutionsRouteContext } from './executions-route.ts';
import { HttpError, sendError, sendJson, shuttingDown, toHttpError } from './http-error.ts';
import { loadPageFiles, sendPageFile } from './static-page.ts';

/** Options of {@link createDemoServer}. */
export interface DemoServerOptions {
  /** Runs the executions: a `SandboxEngine`, adapted (see compose/isolate-engine.ts). */
  runner: ExecutionRunner;
  /** Admission checks before each execution (tiers 3 and 4, concurrency). */
  guards: readonly ExecutionGuard[];
  /** Ceilings a request's `limits` may not exceed; default core's defaults. */
  maxLimits?: Readonly<ExecutionLimits>;
  /** Largest request body in bytes; default 1 MiB (room for 512 KiB of code, JSON-escaped). */
  maxBodyBytes?: number;
  /** Milliseconds shutdown waits for executions to end before closing sockets; default 5 000. */
  shutdownGraceMs?: number;
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
  const registry = createExecutionRegistry();
  let closing: Promise<void> | undefined;
  const route: ExecutionsRouteContext = {
    runner: settings.runner,
    guards: settings.guards,
    parseRequest: createExecutionRequestParser(settings.maxLimits ?? defaultExecutionLimits),
    maxBodyBytes: settings.maxBodyBytes ?? 1_048_576,
    registry,
    logger,
    accepting: () => closing === undefined,
  };
  const pages = await loadPageFiles();
  const catalogue = exampleCatalogue();

  async function handle(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const { pathname } = new URL(request.url ?? '/', 'http://localhost');
    if (closing !== undefined) throw shuttingDown();
    if (pathname === '/v1/executions') {
      if (request.method !== 'POST') throw methodNotAllowed('POST');
      return createExecution(request, response, route);
    }
    if (request.method !== 'GET' && request.method !== 'HEAD') throw methodNotAllowed('GET');
    if (pathname === '/healthz') {
      return sendJson(response, 200, { status: 'ok', running: registry.size });
    }
    if (pathname === '/v1/examples') return sendJson(response, 200, catalogue);
    if (sendPageFile(response, pages, pathname)) return;
    throw new HttpError(404, { code: 'NOT_FOUND', message: `No route for ${pathname}` });
  }

  const server = createServer((request, response) => {
    handle(request, response).catch((error: unknown) => {
      const httpError = toHttpError(error);
      if (httpError.status >= 500) logger.error({ err: String(error) }, 'request failed');
      sendError(response, httpError);
    });
  });
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

function methodNotAllowed(allowed: string): HttpError {
  return new HttpError(
    405,
    { code: 'METHOD_NOT_ALLOWED', message: `Use ${allowed}` },
    { allow: allowed },
  );
}

/** The one-click examples and attacks the playground offers, from the CLI's own lists. */
function exampleCatalogue() {
  return {
    examples: examples.map(({ id, title, code, limits }) => ({
      id,
      title,
      code,
      limits: limits ?? {},
    })),
    attacks: isolateAttacks
      .filter((attack) => attack.inPlayground)
      .map(({ id, attack, code, limits, containedBy }) => ({
        id,
        title: attack,
        code,
        limits: limits ?? {},
        containedBy,
      })),
  };
}
