// The demo's HTTP server on node:http: routes, error mapping, health, and a graceful shutdown
// that ends running executions before closing connections. This is the file to copy when wiring
// the sandbox into a backend; the pieces it calls each do one job.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  defaultExecutionLimits,
  type ExecutionGuard,
  type ExecutionLimits,
  type Logger,
  silentLogger,
} from '@coda/sandbox-core';
import { isolateAttacks } from '../attacks/isolate-attacks.ts';
import { examples } from '../snippets/examples.ts';
import { createExecutionRegistry } from './execution-registry.ts';
import { createExecutionRequestParser } from './execution-request.ts';
import type { ExecutionRunner } from './execution-runner.ts';
import { createExecution, type ExecutionsRouteContext } from './executions-route.ts';
import { HttpError, sendError, sendJson, toHttpError } from './http-error.ts';
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

/** Creates the server; nothing listens until {@link DemoServer.listen}. */
export async function createDemoServer(options: DemoServerOptions): Promise<DemoServer> {
  const logger = options.logger ?? silentLogger;
  const registry = createExecutionRegistry();
  const route: ExecutionsRouteContext = {
    runner: options.runner,
    guards: options.guards,
    parseRequest: createExecutionRequestParser(options.maxLimits ?? defaultExecutionLimits),
    maxBodyBytes: options.maxBodyBytes ?? 1_048_576,
    registry,
    logger,
  };
  const pages = await loadPageFiles();
  const catalogue = exampleCatalogue();
  let closing: Promise<void> | undefined;

  async function handle(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const { pathname } = new URL(request.url ?? '/', 'http://localhost');
    if (closing !== undefined) {
      throw new HttpError(
        503,
        { code: 'SHUTTING_DOWN', message: 'Server is shutting down' },
        { connection: 'close' },
      );
    }
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
      timer = setTimeout(resolve, options.shutdownGraceMs ?? 5_000);
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
