// The raw TCP server and tunnel clients of the egress relay tests (egress-relay.test.ts and
// attack-egress-relay.test.ts): a server that sends N bytes on request, CONNECT and SOCKS5
// tunnels to it through a real EgressProxy, and the relay processes below this process.
import { readdirSync, readFileSync } from 'node:fs';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { afterAll, beforeAll } from 'vitest';
import { EgressProxy } from '../../src/egress/egress-proxy.ts';
import { tableLookup } from './egress-servers.ts';

export const MiB = 1024 * 1024;

/** A server that, per connection, reads a line `N` then sends N bytes of 'z', then waits. */
interface RawServer {
  readonly port: number;
  /** Resolves with each accepted connection. */
  readonly accepted: Socket[];
  close(): Promise<void>;
}
const chunk = Buffer.alloc(MiB, 0x7a);

/** The raw server of the test file that called {@link useRawServer}. */
let server: RawServer | undefined;

function current(): RawServer {
  if (server === undefined) throw new Error('useRawServer() was not called in this test file');
  return server;
}

/** The raw server, started before the file's tests and closed after them. */
export const raw: Pick<RawServer, 'port' | 'accepted'> = {
  get port() {
    return current().port;
  },
  get accepted() {
    return current().accepted;
  },
};

/** Starts {@link raw} before the calling file's tests and closes it after them. */
export function useRawServer(): void {
  beforeAll(async () => {
    server = await startRawServer();
  });
  afterAll(async () => {
    await server?.close();
    server = undefined;
  });
}

async function startRawServer(): Promise<RawServer> {
  const accepted: Socket[] = [];
  const listening: Server = createServer((socket) => {
    accepted.push(socket);
    socket.on('error', () => {});
    let line = '';
    socket.on('data', (data) => {
      line += String(data);
      if (!line.includes('\n')) return;
      let left = Number(line.trim());
      line = '';
      const pump = (): void => {
        while (left > 0) {
          const piece = chunk.subarray(0, Math.min(left, chunk.length));
          left -= piece.length;
          if (!socket.write(piece)) return void socket.once('drain', pump);
        }
      };
      pump();
    });
  });
  await new Promise<void>((resolve) => listening.listen(0, '127.0.0.1', resolve));
  return {
    port: (listening.address() as { port: number }).port,
    accepted,
    close: () =>
      new Promise((resolve) => {
        for (const socket of accepted) socket.destroy();
        listening.close(() => resolve());
      }),
  };
}

/** Processes of the relay (the helper and its per-tunnel children) below this process. */
export function relayProcesses(): { pid: number; name: string }[] {
  const parents = new Map<number, number>();
  const names = new Map<number, string>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      parents.set(Number(entry), Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]));
      names.set(Number(entry), readFileSync(`/proc/${entry}/cmdline`, 'utf8').replace(/\0+$/, ''));
    } catch {
      // gone meanwhile
    }
  }
  const below = (pid: number): boolean => {
    for (let at = parents.get(pid); at !== undefined && at > 1; at = parents.get(at)) {
      if (at === process.pid) return true;
    }
    return false;
  };
  return [...names]
    .filter(([pid, name]) => name.startsWith('coda-egress-relay') && below(pid))
    .map(([pid, name]) => ({ pid, name }));
}

/** Resolves once `check` holds (polling), or rejects after `ms`. */
export async function until(check: () => boolean, what: string, ms = 20_000): Promise<void> {
  const end = Date.now() + ms;
  while (!check()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/**
 * Opens a CONNECT tunnel to the raw server through the proxy at `proxyPort`, asks for `size`
 * bytes and counts what arrives; `ended` resolves with the total once the tunnel closes.
 */
export async function tunnel(proxyPort: number, size: number) {
  const socket = connect(proxyPort, '127.0.0.1');
  socket.on('error', () => {});
  await new Promise<void>((resolve) => socket.once('connect', resolve));
  socket.write(`CONNECT raw.test:${raw.port} HTTP/1.1\r\nHost: raw.test:${raw.port}\r\n\r\n`);
  let head = '';
  let received = 0;
  await new Promise<void>((resolve, reject) => {
    const onData = (data: Buffer): void => {
      head += data.toString('latin1');
      const end = head.indexOf('\r\n\r\n');
      if (end < 0) return;
      socket.off('data', onData);
      if (head.startsWith('HTTP/1.1 200')) {
        received += head.length - end - 4;
        resolve();
      } else reject(new Error(head));
    };
    socket.on('data', onData);
  });
  socket.on('data', (data: Buffer) => {
    received += data.length;
  });
  const request = `${size}\n`;
  socket.write(request);
  const ended = new Promise<number>((resolve) => socket.once('close', () => resolve(received)));
  return { socket, request, ended, received: () => received };
}

/** The same through a SOCKS5 tunnel: greeting, CONNECT by name, then as {@link tunnel}. */
export async function socksTunnel(proxyPort: number, size: number) {
  const socket = connect(proxyPort, '127.0.0.1');
  socket.on('error', () => {});
  await new Promise<void>((resolve) => socket.once('connect', resolve));
  const name = Buffer.from('raw.test');
  socket.write(Buffer.from([0x05, 0x01, 0x00]));
  socket.write(
    Buffer.concat([
      Buffer.from([0x05, 0x01, 0x00, 0x03, name.length]),
      name,
      Buffer.from([raw.port >> 8, raw.port & 0xff]),
    ]),
  );
  // Two bytes of method choice, then the 10-byte reply (0x00: granted).
  let answer = Buffer.alloc(0);
  let received = 0;
  await new Promise<void>((resolve, reject) => {
    const onData = (data: Buffer): void => {
      answer = Buffer.concat([answer, data]);
      if (answer.length < 12) return;
      socket.off('data', onData);
      if (answer[3] === 0x00) {
        received += answer.length - 12;
        resolve();
      } else reject(new Error(`SOCKS reply ${answer[3]}`));
    };
    socket.on('data', onData);
  });
  socket.on('data', (data: Buffer) => {
    received += data.length;
  });
  const request = `${size}\n`;
  socket.write(request);
  const ended = new Promise<number>((resolve) => socket.once('close', () => resolve(received)));
  return { socket, request, ended, received: () => received };
}

export async function open(policy: { maxEgressBytes?: number } = {}) {
  const proxy = new EgressProxy({ lookup: tableLookup({ 'raw.test': ['127.0.0.1'] }) });
  const listener = await proxy.openTcp({ allow: ['raw.test'], allowPrivate: true, ...policy });
  return { proxy, listener, port: (listener.address as { port: number }).port };
}
