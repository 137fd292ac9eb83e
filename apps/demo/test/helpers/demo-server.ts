// A real demo server on a free loopback port, with a real engine and guards on an in-memory
// store — what `pnpm demo serve` runs, with limits a test can reach quickly.
import type { ExecutionGuard } from '@coda/sandbox-core';
import type { SandboxEngine } from '@coda/sandbox-isolate';
import { createMemoryLimitStore } from '@coda/sandbox-limits-redis';
import { createDemoGuards, type GuardSettings } from '../../src/compose/guards.ts';
import { createDemoEngine } from '../../src/compose/isolate-engine.ts';
import { createDemoServer, type DemoServer } from '../../src/server/create-server.ts';

/** A started server and its engine. */
export interface StartedServer {
  server: DemoServer;
  engine: SandboxEngine;
  url: string;
  /** Closes the server (gracefully) and disposes the engine. */
  stop(): Promise<void>;
}

/** Guard figures for tests: the rate limit is reachable in a few requests of one user. */
export const testGuardSettings: GuardSettings = {
  maxExecutionsPerTurn: 2,
  ratePerUser: 3,
  windowMs: 60_000,
  burst: 3,
  maxConcurrentPerUser: 4,
};

/** Starts a server with `guards` (default: the demo's guards with {@link testGuardSettings}). */
export async function startDemoServer(
  options: { guards?: ExecutionGuard[]; maxBodyBytes?: number } = {},
): Promise<StartedServer> {
  const engine = createDemoEngine({ maxConcurrent: 4 });
  const guards = options.guards ?? createDemoGuards(createMemoryLimitStore(), testGuardSettings);
  const server = await createDemoServer({
    runner: engine,
    guards,
    ...(options.maxBodyBytes === undefined ? {} : { maxBodyBytes: options.maxBodyBytes }),
  });
  const address = await server.listen(0);
  return {
    server,
    engine,
    url: `http://127.0.0.1:${address.port}`,
    async stop() {
      await server.close();
      await engine.dispose();
    },
  };
}
