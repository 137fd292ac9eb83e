// A throwaway redis-server for the demo's tests: the one the limits package's tests start
// (Debian's redis-server on a free loopback port, no persistence, a temp dir), or the server
// REDIS_URL names when the environment provides one.
import { startRedis as startRedisProcess } from '../../../../packages/sandbox-limits-redis/test/redis-servers.ts';

/** A Redis server for one test file. */
export interface TestRedis {
  url: string;
  stop(): Promise<void>;
}

/** Starts redis-server (or takes REDIS_URL) and resolves once it answers. */
export async function startRedis(): Promise<TestRedis> {
  if (process.env.REDIS_URL) return { url: process.env.REDIS_URL, stop: async () => {} };
  const server = await startRedisProcess();
  return { url: `redis://127.0.0.1:${server.port}`, stop: () => server.stop() };
}
