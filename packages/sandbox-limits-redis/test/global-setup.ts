// Starts one standalone Redis (unless REDIS_URL names one) and one 3-primary cluster for the whole
// test run, hands their addresses to the tests, and stops them afterwards.
import type { TestProject } from 'vitest/node';
import { type RedisProcess, startRedis, startRedisCluster } from './redis-servers.ts';

declare module 'vitest' {
  export interface ProvidedContext {
    /** `redis://host:port` of the standalone server. */
    redisUrl: string;
    /** Ports of the cluster's primaries on 127.0.0.1. */
    clusterPorts: number[];
  }
}

export default async function setup(project: TestProject) {
  const [standalone, cluster] = await Promise.all([
    process.env.REDIS_URL ? undefined : startRedis(),
    startRedisCluster(3),
  ]);
  const external: RedisProcess | undefined = standalone;
  project.provide('redisUrl', process.env.REDIS_URL ?? `redis://127.0.0.1:${external?.port}`);
  project.provide('clusterPorts', cluster.ports);
  return async () => {
    await Promise.all([external?.stop(), cluster.stop()]);
  };
}
