// Real redis-server processes for the tests, started by the limits package's own test helpers
// (imported by path, not copied), and its fail-fast ioredis settings: one standalone server for
// the whole run, and servers of their own for tests that stop Redis on purpose.
export {
  failFast,
  type RedisProcess,
  startRedis,
} from '../../../../packages/sandbox-limits-redis/test/redis-servers.ts';
