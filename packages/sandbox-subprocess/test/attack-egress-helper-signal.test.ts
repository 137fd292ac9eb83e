// One run ends every run's relayed tunnels (attack round 36). The proxy's relay helper (one
// perl process for every run of the proxy) passes each connection a run's forwarder hands it on
// to Node with a blocking sendmsg(2) on Node's IPC channel. A run that floods its forwarder with
// connections fills that channel whenever Node reads it slower than the helper writes; the
// helper then sleeps in sendmsg. The helper has a SIGCHLD handler, installed by perl without
// SA_RESTART, so a relay child ending then (any tunnel of any run) interrupts the call: EINTR,
// which the helper took for a broken channel and quit, killing every relay child with it.
import { type ChildProcess, spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { describe, expect, it } from 'vitest';
import { EgressProxy } from '../src/egress/egress-proxy.ts';
import { tableLookup } from './support/egress-servers.ts';
import { python } from './support/helpers.ts';
import { MiB, raw, relayProcesses, tunnel, until, useRawServer } from './support/relay-tunnels.ts';

useRawServer();

// The stand-in forwarder of egress-forwarder-pass.test.ts (the channel first, then every
// accepted connection passed as one byte with its descriptor), as the real forwarder does.
const fakeForwarder = `
import socket, sys
ch = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
ch.connect(sys.argv[1])
print(ch.recv(1).decode() or 'EOF', flush=True)
l = socket.socket(); l.bind(('127.0.0.1', 0)); l.listen(4096)
print(l.getsockname()[1], flush=True)
while True:
    c, _ = l.accept()
    socket.send_fds(ch, [b'c'], [c.fileno()])
    c.close()
`;

// The attacking run's program: opens its connections to its proxy port as fast as it can and
// keeps them, then (once told) ends its own relayed tunnels with a reset, one every 20 ms.
const flood = `
import socket, struct, sys, time
port, count, tunnels = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
mine = []
for i in range(tunnels):
    s = socket.create_connection(('127.0.0.1', port))
    s.sendall(('CONNECT raw.test:%s HTTP/1.1\\r\\nHost: raw.test\\r\\n\\r\\n' % sys.argv[4]).encode())
    head = b''
    while b'\\r\\n\\r\\n' not in head: head += s.recv(100)
    s.sendall(b'%d\\n' % (2 * 1024 * 1024))
    got = len(head) - head.index(b'\\r\\n\\r\\n') - 4
    while got < 2 * 1024 * 1024: got += len(s.recv(1 << 20))
    mine.append(s)
print('ready', flush=True)
sys.stdin.readline()
held = []
for i in range(count):
    try:
        held.append(socket.create_connection(('127.0.0.1', port)))
    except OSError:
        pass
    if i % 200 == 199 and mine:
        s = mine.pop()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack('ii', 1, 0))
        s.close()
for s in mine:
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack('ii', 1, 0))
    s.close()
    time.sleep(0.02)
print('done', len(held), flush=True)
time.sleep(30)
`;

describe('the shared relay helper under one run’s connection flood', () => {
  it('keeps another run’s relayed tunnel (and itself) alive while a tunnel ends', async () => {
    const proxy = new EgressProxy({ lookup: tableLookup({ 'raw.test': ['127.0.0.1'] }) });
    const children: ChildProcess[] = [];
    try {
      // The victim: another run of the same proxy, its tunnel past 1 MiB, on the relay.
      const victim = await proxy.openTcp({ allow: ['raw.test'], allowPrivate: true });
      const download = await tunnel((victim.address as { port: number }).port, 2 * MiB);
      await until(() => download.received() === 2 * MiB, 'the victim’s download');
      const helper = relayProcesses().find((entry) => entry.name === 'coda-egress-relay');
      expect(helper).toBeDefined();
      // The attacker: a forwarded listener with the stand-in forwarder.
      const attacker = proxy.openUnix(
        { allow: ['raw.test'], allowPrivate: true },
        { forwarded: true },
      );
      const forwarder = spawn(
        python,
        ['-c', fakeForwarder, (attacker.address as { path: string }).path],
        { stdio: ['ignore', 'pipe', 'inherit'] },
      );
      children.push(forwarder);
      const lines = createInterface({ input: forwarder.stdout! })[Symbol.asyncIterator]();
      expect(String((await lines.next()).value)).toBe('P');
      const port = Number((await lines.next()).value);
      const program = spawn(python, ['-c', flood, String(port), '3000', '12', String(raw.port)], {
        stdio: ['pipe', 'pipe', 'inherit'],
      });
      children.push(program);
      const said = createInterface({ input: program.stdout! })[Symbol.asyncIterator]();
      expect(String((await said.next()).value)).toBe('ready');
      const victimClosed = { value: false };
      download.socket.once('close', () => {
        victimClosed.value = true;
      });
      program.stdin!.write('go\n');
      const done = String((await said.next()).value);
      expect(done.startsWith('done')).toBe(true);
      await new Promise((resolve) => setTimeout(resolve, 500));
      // The helper is the one it was, the victim's tunnel still open and its report clean.
      expect(relayProcesses().find((entry) => entry.name === 'coda-egress-relay')?.pid).toBe(
        helper?.pid,
      );
      expect(victimClosed.value).toBe(false);
      expect(victim.session.report().denied).toEqual([]);
    } finally {
      for (const child of children) child.kill('SIGKILL');
      await proxy.close();
    }
  }, 120_000);
});
