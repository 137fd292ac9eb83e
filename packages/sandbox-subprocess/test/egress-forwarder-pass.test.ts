// Connections passed from a run's forwarder to the host (forwarder.ts, host-relay.ts): a real
// EgressProxy and relay helper, with python3 standing in for the forwarder inside the sandbox
// (it sends descriptors over the listener's first connection exactly as the forwarder does), and
// one real sandboxed run. What must hold: the channel is the first connection only; only one
// connected TCP socket per message is taken, anything else is closed and reported; a passed
// tunnel goes to the splice relay and is counted exactly; the process that passes cannot be
// read by the command.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { connect } from 'node:net';
import { createInterface } from 'node:readline';
import { describe, expect, it } from 'vitest';
import { EgressProxy } from '../src/egress/egress-proxy.ts';
import { createSandbox } from '../src/index.ts';
import { tableLookup } from './support/egress-servers.ts';
import { python } from './support/helpers.ts';
import { MiB, raw, relayProcesses, tunnel, until, useRawServer } from './support/relay-tunnels.ts';

useRawServer();

// The stand-in forwarder: connects to the proxy socket first (the channel), prints the host's
// one-byte answer, sends what `mode` says as its first message, then listens on 127.0.0.1 and
// passes every connection it accepts as the real forwarder does (one byte, one descriptor).
const fakeForwarder = `
import os, socket, sys
path, mode = sys.argv[1], sys.argv[2]
ch = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
ch.connect(path)
answer = ch.recv(1)
print(answer.decode() or 'EOF', flush=True)
keep = []
if mode == 'pipe':
    r, w = os.pipe(); keep += [r, w]
    socket.send_fds(ch, [b'c'], [r])
elif mode == 'two':
    a, b = socket.socketpair(); keep += [a, b]
    r, w = os.pipe(); keep += [r, w]
    socket.send_fds(ch, [b'c'], [a.fileno(), r])
elif mode == 'none':
    ch.send(b'c')
elif mode == 'listening':
    l = socket.socket(); l.bind(('127.0.0.1', 0)); l.listen(); keep.append(l)
    socket.send_fds(ch, [b'c'], [l.fileno()])
elif mode == 'udp':
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); keep.append(u)
    socket.send_fds(ch, [b'c'], [u.fileno()])
elif mode == 'unix':
    a, b = socket.socketpair(); keep += [a, b]
    socket.send_fds(ch, [b'c'], [a.fileno()])
elif mode == 'unconnected':
    t = socket.socket(); keep.append(t)
    socket.send_fds(ch, [b'c'], [t.fileno()])
l = socket.socket(); l.bind(('127.0.0.1', 0)); l.listen()
print(l.getsockname()[1], flush=True)
while True:
    c, _ = l.accept()
    socket.send_fds(ch, [b'c'], [c.fileno()])
    c.close()
`;

/** A proxy with one forwarded Unix listener and the stand-in forwarder on it. */
async function forwarded(mode: string, passConnections = true) {
  const proxy = new EgressProxy({
    lookup: tableLookup({ 'raw.test': ['127.0.0.1'] }),
    passConnections,
  });
  const listener = proxy.openUnix({ allow: ['raw.test'], allowPrivate: true }, { forwarded: true });
  const path = (listener.address as { path: string }).path;
  const child: ChildProcess = spawn(python, ['-c', fakeForwarder, path, mode], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const lines = createInterface({ input: child.stdout! })[Symbol.asyncIterator]();
  const answer = String((await lines.next()).value);
  const port = answer === 'P' ? Number((await lines.next()).value) : 0;
  return {
    proxy,
    listener,
    path,
    answer,
    port,
    close: async () => {
      child.kill('SIGKILL');
      await listener.close();
      await proxy.close();
    },
  };
}

describe('connections passed by the forwarder', () => {
  it('carries a passed tunnel through the splice relay and counts it exactly', async () => {
    const run = await forwarded('tcp');
    try {
      expect(run.answer).toBe('P');
      const size = 3 * MiB + 5;
      const download = await tunnel(run.port, size);
      await until(() => download.received() === size, 'the whole download');
      // Past 1 MiB: the helper's per-tunnel relay moves it, between the passed socket and the server.
      expect(
        relayProcesses()
          .map((entry) => entry.name)
          .sort(),
      ).toEqual(['coda-egress-relay', 'coda-egress-relay: tunnel']);
      // The relay's leg to the client is local: it sends with Reno, whatever the host's default
      // (here BBR, whose timer pacing costs on loopback); the server's leg keeps the default.
      const ss = execFileSync('ss', ['-tin', `sport = :${run.port}`]).toString();
      expect(/\b(reno|bbr|cubic)\b/.exec(ss)?.[1]).toBe('reno');
      raw.accepted.at(-1)?.end();
      expect(await download.ended).toBe(size);
      await run.listener.close();
      expect(run.listener.session.report()).toEqual({
        allowed: [
          {
            host: 'raw.test',
            port: raw.port,
            bytes: size + download.request.length,
            bytesSent: download.request.length,
            bytesReceived: size,
            connections: 1,
          },
        ],
        denied: [],
      });
    } finally {
      await run.close();
    }
  });

  // What the stand-in passes first, and the refusal the report must carry (the channel then
  // goes on: a good connection after it is carried).
  const refusals: [string, string][] = [
    ['pipe', 'a descriptor that is not a socket'],
    ['two', 'more than one descriptor in a message'],
    ['none', 'a message without a descriptor'],
    ['listening', 'a listening socket'],
    ['udp', 'a socket that is not a stream'],
    ['unix', 'a socket that is not IPv4 or IPv6'],
    ['unconnected', 'a socket that is not connected'],
  ];
  it.each(refusals)(
    'refuses %s, reports it, and carries the next connection',
    async (mode, why) => {
      const run = await forwarded(mode);
      try {
        expect(run.answer).toBe('P');
        await until(() => run.listener.session.report().denied.length === 1, 'the refusal');
        expect(run.listener.session.report().denied).toEqual([
          {
            host: '(forwarder)',
            port: 0,
            reason: 'protocol',
            detail: `a passed connection: ${why}`,
          },
        ]);
        const download = await tunnel(run.port, 10);
        await until(() => download.received() === 10, 'the answer');
        raw.accepted.at(-1)?.end();
        expect(await download.ended).toBe(10);
      } finally {
        await run.close();
      }
    },
  );

  it('takes the first connection only as the channel: a second one is read as a proxy request', async () => {
    const run = await forwarded('tcp');
    try {
      expect(run.answer).toBe('P');
      const second = connect(run.path);
      let text = '';
      second.on('data', (data: Buffer) => {
        text += data.toString('latin1');
      });
      const closed = new Promise((resolve) => second.once('close', resolve));
      second.write('GET /x HTTP/1.1\r\nHost: raw.test\r\nConnection: close\r\n\r\n');
      await closed;
      expect(text.split('\r\n')[0]).toBe('HTTP/1.1 400 Bad Request');
    } finally {
      await run.close();
    }
  });

  it("answers 'R' when connections are not passed (the forwarder relays them)", async () => {
    const run = await forwarded('tcp', false);
    try {
      expect(run.answer).toBe('R');
    } finally {
      await run.close();
    }
  });
});

describe('egressForwarding', () => {
  it('is validated: anything but pass or relay is refused naming the option', () => {
    expect(() => createSandbox({}, { egressForwarding: 'splice' as never })).toThrow(
      /^Invalid egressForwarding: .*pass.*relay/,
    );
  });
});

describe('the forwarder inside a run', () => {
  // Each perl process in the run other than the command's, and whether its descriptors can be
  // listed: the forwarder's accept loop holds the passed sockets and must not be readable.
  const probe = String.raw`
import os
for p in sorted(os.listdir('/proc')):
    if not p.isdigit() or int(p) == os.getpid(): continue
    try: cmd = open('/proc/%s/cmdline' % p, 'rb').read().split(b'\0')
    except OSError: continue
    if not cmd[0].endswith(b'perl'): continue
    try:
        os.listdir('/proc/%s/fd' % p); print('readable')
    except PermissionError: print('refused')
`;
  const cases: ['pass' | 'relay', string[]][] = [
    ['pass', ['refused']],
    ['relay', ['readable']],
  ];
  it.each(cases)(
    '%s: the accept loop is %j to the command, and a tunnel is counted exactly',
    async (egressForwarding, expected) => {
      const lookup = tableLookup({ 'raw.test': ['127.0.0.1'] });
      const sandbox = createSandbox(
        { network: { allow: ['raw.test'], allowPrivate: true }, timeoutMs: 30_000 },
        { lookup, egressForwarding },
      );
      try {
        const listed = await sandbox.run(python, ['-c', probe]);
        expect([listed.exitCode, listed.stdout.trim().split('\n')]).toEqual([0, expected]);
        // 2 MiB + 1 through a CONNECT tunnel (past the 1 MiB hand-over), the request written by
        // the command; the server ends the connection once it has sent.
        const size = 2 * MiB + 1;
        const fetch = String.raw`
import socket, sys
s = socket.create_connection(('127.0.0.1', 3128))
s.sendall(b'CONNECT raw.test:%d HTTP/1.1\r\n\r\n' % int(sys.argv[1]))
head = b''
while b'\r\n\r\n' not in head: head += s.recv(1)
s.sendall(b'%d\n' % int(sys.argv[2]))
n = 0
while n < int(sys.argv[2]):
    d = s.recv(1 << 20)
    if not d: break
    n += len(d)
print(head.split(b'\r\n')[0].decode(), n)
`;
        const accepted = raw.accepted.length;
        const fetched = sandbox.run(python, ['-c', fetch, String(raw.port), String(size)]);
        await until(() => raw.accepted.length > accepted, 'the upstream connection');
        const result = await fetched;
        expect(result.stdout.trim()).toBe(`HTTP/1.1 200 Connection Established ${size}`);
        const request = `${size}\n`;
        expect(result.network?.allowed).toEqual([
          {
            host: 'raw.test',
            port: raw.port,
            bytes: size + request.length,
            bytesSent: request.length,
            bytesReceived: size,
            connections: 1,
          },
        ]);
      } finally {
        await sandbox.close();
      }
    },
  );
});
