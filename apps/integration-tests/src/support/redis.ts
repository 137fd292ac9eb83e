// Real redis-server processes for the tests, started by the limits package's own test helpers
// (imported by path, not copied): one standalone server for the whole run, and servers of their
// own for tests that stop Redis on purpose.
export {
  type RedisProcess,
  startRedis,
} from '../../../../packages/sandbox-limits-redis/test/redis-servers.ts';

/** ioredis settings that fail fast while Redis is down instead of queueing commands. */
export const failFast = {
  enableOfflineQueue: false,
  maxRetriesPerRequest: 1,
  connectTimeout: 1_000,
  retryStrategy: () => 100,
} as const;
