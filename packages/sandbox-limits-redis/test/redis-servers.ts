// Starts real redis-server processes for the tests: a standalone server and a 3-primary cluster,
// each on free ports with no persistence in a temp dir. Nothing here mocks Redis.
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** ioredis settings that fail fast when Redis is down instead of queueing commands. */
export const failFast = {
  enableOfflineQueue: false,
  maxRetriesPerRequest: 1,
  connectTimeout: 1_000,
  retryStrategy: () => 100,
} as const;

/** A redis-server this process started. */
export interface RedisProcess {
  readonly port: number;
  /** Kills the server at once (SIGKILL, like a crash), leaving its dir for a restart. */
  kill(): Promise<void>;
  /** Starts it again on the same port. */
  restart(): Promise<void>;
  /** Kills it and removes its dir. */
  stop(): Promise<void>;
}

async function portIsFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

/** A port that is free, and whose cluster bus port (port + 10 000) is free too. */
export async function freePort(): Promise<number> {
  for (let attempt = 0; attempt < 200; attempt++) {
    const port = 20_000 + Math.floor(Math.random() * 30_000);
    if ((await portIsFree(port)) && (await portIsFree(port + 10_000))) return port;
  }
  throw new Error('no free port found');
}

/** Runs redis-cli against `port` and returns its output. */
export async function redisCli(port: number, ...args: string[]): Promise<string> {
  const { stdout } = await run('redis-cli', ['-p', String(port), ...args]);
  return stdout.trim();
}

/** Waits until the server answers on `port` and is the process we started (not a neighbour's). */
async function waitForServer(port: number, child: ChildProcess, log: () => string): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`redis-server exited: ${log()}`);
    try {
      const info = await redisCli(port, 'INFO', 'server');
      if (
        info.includes(`process_id:${child.pid}\r`) ||
        info.includes(`process_id:${child.pid}\n`)
      ) {
        return;
      }
    } catch {}
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`redis-server on ${port} did not answer: ${log()}`);
}

/**
 * Starts a redis-server with no persistence on a free port (another if that one is taken in the
 * meantime); `cluster` enables cluster mode.
 */
export async function startRedis(
  options: { cluster?: boolean; clusterNodeTimeoutMs?: number } = {},
): Promise<RedisProcess> {
  const dir = await mkdtemp(join(tmpdir(), 'coda-limits-redis-'));
  let child: ChildProcess | undefined;
  const start = async (port: number) => {
    const args = [
      '--port',
      String(port),
      '--bind',
      '127.0.0.1',
      '--save',
      '',
      '--appendonly',
      'no',
      // A replica that (re)joins gets its full sync at once, not after the default 5 s wait for
      // more replicas to share it.
      '--repl-diskless-sync-delay',
      '0',
    ];
    args.push('--dir', dir);
    if (options.cluster)
      args.push('--cluster-enabled', 'yes', '--cluster-config-file', 'nodes.conf');
    if (options.clusterNodeTimeoutMs !== undefined) {
      args.push('--cluster-node-timeout', String(options.clusterNodeTimeoutMs));
    }
    let output = '';
    const started = spawn('redis-server', args, { stdio: ['ignore', 'pipe', 'pipe'] });
    child = started;
    const keep = (chunk: Buffer) => {
      output = (output + chunk.toString()).slice(-4_000);
    };
    started.stdout?.on('data', keep);
    started.stderr?.on('data', keep);
    try {
      await waitForServer(port, started, () => output);
    } catch (error) {
      await kill();
      throw error;
    }
  };
  const kill = async () => {
    const current = child;
    if (current === undefined || current.exitCode !== null || current.signalCode !== null) return;
    const exited = new Promise((resolve) => current.once('exit', resolve));
    current.kill('SIGKILL');
    await exited;
  };
  let port = 0;
  for (let attempt = 1; ; attempt++) {
    port = await freePort();
    try {
      await start(port);
      break;
    } catch (error) {
      if (attempt >= 5) {
        await rm(dir, { recursive: true, force: true });
        throw error;
      }
    }
  }
  return {
    port,
    kill,
    restart: () => start(port),
    stop: async () => {
      await kill();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/** A cluster this process started. */
export interface RedisCluster {
  /** Ports of every node, primaries first as created (replicas follow when there are any). */
  readonly ports: number[];
  /** Every node, in the order of `ports`. */
  readonly nodes: RedisProcess[];
  stop(): Promise<void>;
}

/**
 * A cluster of `size` primaries, each with `replicas` replicas (default none), every slot
 * assigned and the state `ok` on every node. `nodeTimeoutMs` is `cluster-node-timeout`: how long
 * a primary may be unreachable before its replica takes over (Redis's default is 15 s).
 */
export async function startRedisCluster(
  size = 3,
  options: { replicas?: number; nodeTimeoutMs?: number } = {},
): Promise<RedisCluster> {
  const replicas = options.replicas ?? 0;
  const nodes = await Promise.all(
    Array.from({ length: size * (1 + replicas) }, () =>
      startRedis({
        cluster: true,
        ...(options.nodeTimeoutMs === undefined
          ? {}
          : { clusterNodeTimeoutMs: options.nodeTimeoutMs }),
      }),
    ),
  );
  const stop = async () => {
    await Promise.all(nodes.map((node) => node.stop()));
  };
  try {
    const addresses = nodes.map((node) => `127.0.0.1:${node.port}`);
    await run('redis-cli', [
      '--cluster',
      'create',
      ...addresses,
      '--cluster-replicas',
      String(replicas),
      '--cluster-yes',
    ]);
    const deadline = Date.now() + 20_000;
    for (const node of nodes) {
      for (;;) {
        const info = await redisCli(node.port, 'CLUSTER', 'INFO');
        if (info.includes('cluster_state:ok')) break;
        if (Date.now() > deadline) throw new Error(`cluster not ok: ${info}`);
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    }
    return { ports: nodes.map((node) => node.port), nodes, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}
