// One standalone redis-server for the whole run (unless REDIS_URL names one), stopped afterwards.
import type { TestProject } from 'vitest/node';
import { startRedis } from './redis.ts';

declare module 'vitest' {
  export interface ProvidedContext {
    /** `redis://host:port` of the shared standalone server. */
    redisUrl: string;
  }
}

export default async function setup(project: TestProject) {
  const server = process.env.REDIS_URL ? undefined : await startRedis();
  project.provide('redisUrl', process.env.REDIS_URL ?? `redis://127.0.0.1:${server?.port}`);
  return async () => {
    await server?.stop();
  };
}
