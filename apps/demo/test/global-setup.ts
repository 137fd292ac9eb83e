// Starts one real redis-server for the whole test run (the limits package's helper: Debian's
// redis-server on a free loopback port, no persistence, a temp dir), or takes the one REDIS_URL
// names, and hands its address to the tests. The API, page and CLI tests keep their limits in it.
import type { TestProject } from 'vitest/node';
import { startRedis } from '../../../packages/sandbox-limits-redis/test/redis-servers.ts';

declare module 'vitest' {
  export interface ProvidedContext {
    /** `redis://host:port` of the run's Redis. */
    redisUrl: string;
  }
}

export default async function setup(project: TestProject) {
  if (process.env.REDIS_URL) {
    project.provide('redisUrl', process.env.REDIS_URL);
    return;
  }
  const server = await startRedis();
  project.provide('redisUrl', `redis://127.0.0.1:${server.port}`);
  return () => server.stop();
}
