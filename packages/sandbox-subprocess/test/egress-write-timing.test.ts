// A tunnel passes each write on as it comes. Two small writes in a row, with the first one not
// yet acknowledged, is every request-and-answer protocol's shape (a TLS handshake's second flight
// is one): a relay with Nagle's algorithm on holds the second write until the far side's delayed
// ACK, 40 ms, at every exchange. Measured before the fix: 44 ms a round through the proxy against
// 1.2 ms direct, every round after the first (from the host, through CONNECT). The clients here
// disable Nagle on their own side, so what is measured is the proxy's. The stall is a fixed
// 40 ms or more, so the bound (a median of 20 ms) stays clear of it on a loaded machine too.
import { execFile } from 'node:child_process';
import { createServer, type Server, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EgressProxy } from '../src/egress/egress-proxy.ts';
import { proxyPortInside } from '../src/egress/forwarder.ts';
import { createSandbox } from '../src/index.ts';
import { tableLookup } from './support/egress-servers.ts';
import { python } from './support/helpers.ts';

/** Rounds each client times; the first is left out (the kernel acknowledges early ones at once). */
const rounds = 12;
const stallFreeMedianMs = 20;

// Per round the server reads two bytes (sent apart), then answers with two bytes sent apart.
let server: Server;
let port = 0;
beforeAll(async () => {
  server = createServer((socket: Socket) => {
    socket.setNoDelay(true);
    socket.on('error', () => {});
    let unread = 0;
    socket.on('data', (data) => {
      unread += data.length;
      for (; unread >= 2; unread -= 2) {
        socket.write('c');
        setTimeout(() => socket.write('d'), 1);
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  port = (server.address() as { port: number }).port;
});
afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

const lookup = tableLookup({ 'rounds.test': ['127.0.0.1'] });
const policy = { allow: ['rounds.test'], allowPrivate: true };

// The client, the same from the host and inside a sandbox: a tunnel through the proxy at argv[1]
// (CONNECT, or SOCKS5 by name with argv[3] 'socks'), then the rounds; prints each round's ms.
const client = `
import socket, sys, time
proxy_port, port, how, rounds = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
s = socket.create_connection(('127.0.0.1', proxy_port))
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
def read(n):
    data = b''
    while len(data) < n:
        more = s.recv(n - len(data))
        if not more: sys.exit('closed after %r' % data)
        data += more
    return data
if how == 'socks':
    name = b'rounds.test'
    s.sendall(b'\\x05\\x01\\x00')
    s.sendall(b'\\x05\\x01\\x00\\x03' + bytes([len(name)]) + name + port.to_bytes(2, 'big'))
    reply = read(12)
    if reply[3] != 0: sys.exit('SOCKS reply %d' % reply[3])
else:
    s.sendall(b'CONNECT rounds.test:%d HTTP/1.1\\r\\nHost: rounds.test:%d\\r\\n\\r\\n' % (port, port))
    head = b''
    while not head.endswith(b'\\r\\n\\r\\n'): head += read(1)
    if not head.startswith(b'HTTP/1.1 200'): sys.exit(head.decode())
for _ in range(rounds):
    start = time.monotonic()
    s.send(b'a'); time.sleep(0.001); s.send(b'b')
    if read(2) != b'cd': sys.exit('a wrong answer')
    print('%.3f' % ((time.monotonic() - start) * 1000))
`;

/** The median of each round's time, the first round left out. */
function medianRound(stdout: string): number {
  const times = stdout
    .trim()
    .split('\n')
    .slice(1)
    .map(Number)
    .sort((a, b) => a - b);
  expect(times).toHaveLength(rounds - 1);
  return times[Math.floor(times.length / 2)] ?? Number.NaN;
}

describe('a tunnel holds no small write back (TCP_NODELAY on every leg the proxy writes)', () => {
  it.each(['connect', 'socks'])('from the host, %s', async (how) => {
    const proxy = new EgressProxy({ lookup });
    try {
      const listener = await proxy.openTcp(policy);
      const proxyPort = (listener.address as { port: number }).port;
      const stdout = await new Promise<string>((resolve, reject) =>
        execFile(
          python,
          ['-c', client, String(proxyPort), String(port), how, String(rounds)],
          (error, out) => (error ? reject(error) : resolve(out)),
        ),
      );
      expect(medianRound(stdout)).toBeLessThan(stallFreeMedianMs);
    } finally {
      await proxy.close();
    }
  });

  it.each([
    ['the client socket passed to the host', 'pass'],
    ["the forwarder's relay", 'relay'],
  ] as const)('from inside a sandbox, through %s', async (_name, egressForwarding) => {
    const sandbox = createSandbox(
      { network: policy, allowFileWrites: false, timeoutMs: 30_000 },
      { lookup, egressForwarding },
    );
    try {
      const result = await sandbox.run(python, [
        '-c',
        client,
        String(proxyPortInside),
        String(port),
        'connect',
        String(rounds),
      ]);
      expect(result.stderr).toBe('');
      expect(result.exitCode).toBe(0);
      expect(medianRound(result.stdout)).toBeLessThan(stallFreeMedianMs);
    } finally {
      await sandbox.close();
    }
  });
});
