// The backends the shared suite runs against: in memory, and real Redis (standalone and cluster)
// through ioredis and node-redis. Each gets a fresh key prefix so test files never share counts.
import { randomUUID } from 'node:crypto';
import { type Logger, silentLogger } from '@coda/sandbox-core';
import { Cluster, Redis } from 'ioredis';
import { createClient, createCluster } from 'redis';
import { inject } from 'vitest';
import { hostWallNow } from '../src/clock/host-clock.ts';
import {
  type Clock,
  createMemoryLimitStore,
  createRedisLimitStore,
  fromIoredis,
  fromNodeRedis,
  type LimitStore,
} from '../src/index.ts';
import { redisLimitStore } from '../src/redis/redis-store.ts';
import { memoryEntries } from '../src/store/memory-store.ts';

/** A store under test plus what the tests need to look behind it. */
export interface Backend {
  readonly label: string;
  /**
   * Makes a store; Redis backends give each store its own client (another "host"). `hostClock`
   * replaces this host's clock for `clock: 'host'`, `logger` gets the store's warnings
   * (standalone ioredis only).
   */
  store(hostClock?: () => unknown, logger?: Logger): LimitStore;
  /** Every live key this backend's stores wrote, with its PTTL (memory: its live entries). */
  keys(): Promise<{ key: string; pttl: number }[]>;
  /** Drops every cached script on every node (SCRIPT FLUSH); memory has none. */
  flushScripts(): Promise<void>;
  close(): Promise<void>;
}

export function memoryBackend(): Backend {
  // One process, one store: every "host" of the suite shares it.
  const store = createMemoryLimitStore();
  return {
    label: 'memory',
    store: () => store,
    keys: async () => memoryEntries(store),
    flushScripts: async () => {},
    close: async () => {},
  };
}

function standaloneOptions() {
  const url = new URL(inject('redisUrl'));
  return { host: url.hostname, port: Number(url.port || 6379) };
}

async function ready(client: Redis | Cluster): Promise<void> {
  if (client.status === 'ready') return;
  await new Promise<void>((resolve, reject) => {
    client.once('ready', () => resolve());
    client.once('error', reject);
  });
}

/** Lists the keys under `prefix` with their PTTL on one ioredis connection. */
async function keysOn(node: Redis, prefix: string) {
  const found: { key: string; pttl: number }[] = [];
  let cursor = '0';
  do {
    const [next, keys] = await node.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1_000);
    cursor = next;
    for (const key of keys) found.push({ key, pttl: await node.pttl(key) });
  } while (cursor !== '0');
  return found;
}

export async function ioredisBackend(
  prefix = `test:${randomUUID()}:`,
  clock: Clock = 'redis',
): Promise<Backend> {
  const admin = new Redis({ ...standaloneOptions(), lazyConnect: false });
  const clients: Redis[] = [admin];
  await ready(admin);
  return {
    label: `ioredis standalone, clock ${clock}`,
    store: (hostClock = hostWallNow, logger = silentLogger) => {
      const client = new Redis({ ...standaloneOptions(), maxRetriesPerRequest: 1 });
      clients.push(client);
      const options = { client: fromIoredis(client), keyPrefix: prefix, clock, logger };
      return redisLimitStore(options, hostClock);
    },
    keys: () => keysOn(admin, prefix),
    flushScripts: async () => {
      await admin.script('FLUSH');
    },
    close: async () => {
      await Promise.all(clients.map((client) => client.quit().catch(() => {})));
    },
  };
}

function clusterNodes() {
  return inject('clusterPorts').map((port) => ({ host: '127.0.0.1', port }));
}

export async function ioredisClusterBackend(prefix = `test:${randomUUID()}:`): Promise<Backend> {
  const admins = clusterNodes().map((node) => new Redis(node));
  const clients: (Redis | Cluster)[] = [...admins];
  await Promise.all(admins.map(ready));
  return {
    label: 'ioredis cluster',
    store: () => {
      const cluster = new Cluster(clusterNodes(), { redisOptions: { maxRetriesPerRequest: 1 } });
      clients.push(cluster);
      return createRedisLimitStore({ client: fromIoredis(cluster), keyPrefix: prefix });
    },
    keys: async () => (await Promise.all(admins.map((node) => keysOn(node, prefix)))).flat(),
    flushScripts: async () => {
      await Promise.all(admins.map((node) => node.script('FLUSH')));
    },
    close: async () => {
      await Promise.all(clients.map((client) => client.quit().catch(() => {})));
    },
  };
}

export async function nodeRedisBackend(kind: 'standalone' | 'cluster'): Promise<Backend> {
  const prefix = `test:${randomUUID()}:`;
  // The ioredis backend's admin connections list keys and flush scripts for this prefix.
  const base =
    kind === 'standalone' ? await ioredisBackend(prefix) : await ioredisClusterBackend(prefix);
  const closers: (() => Promise<unknown>)[] = [];
  const connect = async () => {
    if (kind === 'standalone') {
      const client = createClient({ url: inject('redisUrl') });
      await client.connect();
      closers.push(() => client.close());
      return fromNodeRedis(client);
    }
    const cluster = createCluster({
      rootNodes: inject('clusterPorts').map((port) => ({ url: `redis://127.0.0.1:${port}` })),
    });
    await cluster.connect();
    closers.push(() => cluster.close());
    return fromNodeRedis(cluster);
  };
  const clients = await Promise.all([connect(), connect()]);
  let next = 0;
  return {
    label: `node-redis ${kind}`,
    store: () =>
      createRedisLimitStore({ client: clients[next++ % clients.length]!, keyPrefix: prefix }),
    keys: () => base.keys(),
    flushScripts: () => base.flushScripts(),
    close: async () => {
      await Promise.all(closers.map((close) => close().catch(() => {})));
      await base.close();
    },
  };
}
