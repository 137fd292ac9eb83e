// Faults between a guard and Redis, for the lost-reply tests: a TCP proxy that drops one reply
// (Redis ran the command; the client never hears of it) or cuts every connection, and a poll for
// the lease another host gets once the slot is really free.
import { once } from 'node:events';
import { createServer, type Server, type Socket, connect as tcpConnect } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import type { ConcurrencyGuard } from '../src/index.ts';

/** A TCP proxy to Redis that, once armed, drops the next reply and cuts that connection. */
export async function replyDropper(target: { host: string; port: number }) {
  let armed = false;
  const sockets = new Set<Socket>();
  const server: Server = createServer((client) => {
    const upstream = tcpConnect(target.port, target.host);
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
      socket.on('error', () => {});
    }
    client.pipe(upstream);
    upstream.on('data', (chunk: Buffer) => {
      if (!armed) {
        client.write(chunk);
        return;
      }
      armed = false;
      client.destroy();
      upstream.destroy();
    });
    client.on('close', () => upstream.destroy());
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('no proxy port');
  return {
    port: address.port,
    arm: () => {
      armed = true;
    },
    /** Cuts every connection through the proxy (clients reconnect). */
    cut: () => {
      for (const socket of sockets) socket.destroy();
    },
    close: async () => {
      for (const socket of sockets) socket.destroy();
      server.close();
    },
  };
}

/** The first lease `guard` grants within `ms` (asking every 50 ms), or undefined. */
export async function acquiredWithin(
  guard: ConcurrencyGuard,
  context: () => { executionId: string; userId: string },
  ms: number,
) {
  const deadline = performance.now() + ms;
  let lease = await guard.acquire(context()).catch(() => undefined);
  while (lease === undefined && performance.now() < deadline) {
    await sleep(50);
    lease = await guard.acquire(context()).catch(() => undefined);
  }
  return lease;
}
