// Where tier 3 and 4 counts live: in this process by default (zero setup), or in Redis when
// REDIS_URL is set, so every host of a deployment shares one budget per turn and one rate per user.

import { SandboxUnavailableError } from '@coda/sandbox-core';
import {
  createMemoryLimitStore,
  createRedisLimitStore,
  fromIoredis,
  type LimitStore,
} from '@coda/sandbox-limits-redis';
import { Redis } from 'ioredis';

/** An open limit store and how to close what it opened. */
export interface OpenLimitStore {
  store: LimitStore;
  /** `memory`, or `redis <url without credentials>`, for the demo's output. */
  description: string;
  /** Closes the Redis connection this module opened (the store never owns the client). */
  close(): Promise<void>;
}

/**
 * Opens the store for `redisUrl`: in memory when it is undefined or empty. The Redis client is
 * set to fail fast (no offline queue, one retry), so an outage surfaces as the guards' fail mode
 * rather than as executions hanging while ioredis queues commands.
 */
export async function openLimitStore(redisUrl: string | undefined): Promise<OpenLimitStore> {
  if (redisUrl === undefined || redisUrl === '') {
    return { store: createMemoryLimitStore(), description: 'memory', close: async () => {} };
  }
  const client = new Redis(redisUrl, {
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    connectTimeout: 2_000,
    lazyConnect: true,
  });
  // ioredis reports connection trouble as 'error' events and reconnects by itself; the guards
  // see failed commands (and refuse with UNAVAILABLE), so the events need no handling here.
  client.on('error', () => {});
  try {
    await client.connect();
  } catch (error) {
    // Stop reconnecting, or the attempts would keep the process alive.
    client.disconnect();
    const reason = error instanceof Error ? error.message : String(error);
    throw new SandboxUnavailableError(
      `REDIS_URL is set but Redis at ${redactUrl(redisUrl)} did not answer: ${reason}`,
      { cause: error },
    );
  }
  return {
    // A prefix of its own, so the demo never touches another application's keys.
    store: createRedisLimitStore({ client: fromIoredis(client), keyPrefix: 'coda:demo:' }),
    description: `redis ${redactUrl(redisUrl)}`,
    close: async () => {
      await client.quit().catch(() => client.disconnect());
    },
  };
}

function redactUrl(url: string): string {
  try {
    const parsed = new URL(url);
    parsed.username = '';
    parsed.password = '';
    return parsed.toString();
  } catch {
    return '(unparsable URL)';
  }
}
