// A throwaway redis-server (Debian's) on a free loopback port, no persistence, in a temp dir;
// or the server REDIS_URL names, when the environment provides one.
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';

/** A Redis server for one test file. */
export interface TestRedis {
  url: string;
  stop(): Promise<void>;
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  await new Promise((resolve) => server.close(resolve));
  if (typeof address !== 'object' || address === null) throw new Error('no port');
  return address.port;
}

/** Starts redis-server and waits until it answers PING. */
export async function startRedis(): Promise<TestRedis> {
  if (process.env.REDIS_URL) return { url: process.env.REDIS_URL, stop: async () => {} };
  const port = await freePort();
  const dir = await mkdtemp(join(tmpdir(), 'coda-demo-redis-'));
  const child: ChildProcess = spawn(
    'redis-server',
    [
      '--port',
      String(port),
      '--bind',
      '127.0.0.1',
      '--save',
      '',
      '--appendonly',
      'no',
      '--dir',
      dir,
    ],
    { stdio: 'ignore' },
  );
  const url = `redis://127.0.0.1:${port}`;
  const deadline = Date.now() + 10_000;
  for (;;) {
    const client = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0 });
    client.on('error', () => {}); // refused while the server starts: expected, retried below
    const up = await client
      .connect()
      .then(() => client.ping())
      .then(
        () => true,
        () => false,
      );
    client.disconnect();
    if (up) break;
    if (Date.now() > deadline || child.exitCode !== null)
      throw new Error('redis-server did not start');
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return {
    url,
    async stop() {
      child.kill('SIGKILL');
      await rm(dir, { recursive: true, force: true });
    },
  };
}
