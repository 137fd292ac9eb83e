// A real demo server on a free loopback port, with a real engine and guards on the run's real
// Redis (started by test/global-setup.ts) — what `pnpm demo serve` runs with REDIS_URL set, with
// limits a test can reach quickly.
import type { Logger } from '@coda/sandbox-core';
import type { SandboxEngine } from '@coda/sandbox-isolate';
import { inject } from 'vitest';
import { createDemoGuards, type GuardSettings } from '../../src/compose/guards.ts';
import { createDemoEngine } from '../../src/compose/isolate-engine.ts';
import { openLimitStore } from '../../src/compose/limit-store.ts';
import { createDemoServer, type DemoServer } from '../../src/server/create-server.ts';

/** A started server and its engine. */
export interface StartedServer {
  server: DemoServer;
  engine: SandboxEngine;
  url: string;
  /** Closes the server (gracefully), disposes the engine and closes the Redis connection. */
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

/** Starts a server whose guards enforce `admission` (default {@link testGuardSettings}) in Redis. */
export async function startDemoServer(
  options: { admission?: GuardSettings; logger?: Logger } = {},
): Promise<StartedServer> {
  const admission = options.admission ?? testGuardSettings;
  const store = await openLimitStore(inject('redisUrl'));
  const engine = createDemoEngine({ maxConcurrent: 4 });
  const server = await createDemoServer({
    runner: engine,
    guards: createDemoGuards(store.store, admission),
    admission,
    ...(options.logger === undefined ? {} : { logger: options.logger }),
  });
  const address = await server.listen(0);
  return {
    server,
    engine,
    url: `http://127.0.0.1:${address.port}`,
    async stop() {
      await server.close();
      await engine.dispose();
      await store.close();
    },
  };
}
