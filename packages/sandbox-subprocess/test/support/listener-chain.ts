// Run A tunnels through its own proxy into run B's proxy listener (a Landlock run's TCP port on
// the host's 127.0.0.1) and asks, inside the tunnel, for a host only B's policy allows: what the
// listener-chain attack tests (attack-egress-landlock-chain, -two-cores) observe, written once.
import { createInterface } from 'node:readline';
import type { SubprocessSandbox } from '../../src/index.ts';
import { python } from './helpers.ts';

// Run A's command: a tunnel through its own proxy to loop.test:OTHER (run B's listener), then a
// plain proxy request for the API inside it; prints the CONNECT answer and the request's.
const chain = String.raw`
import os, socket, sys
other, api = int(sys.argv[1]), sys.argv[2]
own = int(os.environ['HTTP_PROXY'].rsplit(':', 1)[1])
s = socket.create_connection(('127.0.0.1', own), 5)
s.sendall(b'CONNECT loop.test:%d HTTP/1.1\r\nHost: loop.test:%d\r\n\r\n' % (other, other))
head = b''
while b'\r\n\r\n' not in head:
    chunk = s.recv(1)
    if not chunk: break
    head += chunk
print('connect', head.split(b'\r\n')[0].decode())
if b' 200 ' in head.split(b'\r\n')[0] + b' ':
    s.sendall(b'GET http://%s/ HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n' % (api.encode(), api.encode()))
    answer = b''
    while True:
        chunk = s.recv(4096)
        if not chunk: break
        answer += chunk
    print('inside', answer.split(b'\r\n')[0].decode(), answer.split(b'\r\n\r\n', 1)[-1].decode().strip())
`;

/**
 * Runs the chain: B holds its listener open while A's command tunnels to it and asks for
 * `apiAuthority` inside. Returns A's stderr, B's listener port, and what was seen: A's first
 * answer and both runs' reports.
 */
export async function tunnelIntoListener(
  a: Pick<SubprocessSandbox, 'run'>,
  b: SubprocessSandbox,
  apiAuthority: string,
) {
  // Run B holds its listener open: it prints the port and waits.
  const holder = b.spawn(python, [
    '-c',
    "import os, sys; print(os.environ['HTTP_PROXY'].rsplit(':', 1)[1], flush=True); sys.stdin.read()",
  ]);
  const lines = createInterface({ input: holder.stdout })[Symbol.asyncIterator]();
  const other = Number((await lines.next()).value);
  const result = await a.run(python, ['-c', chain, String(other), apiAuthority]);
  holder.stdin.end();
  await holder.exited;
  return {
    stderr: result.stderr,
    other,
    seen: {
      told: result.stdout.split('\n')[0],
      bAllowed: holder.network?.report().allowed,
      aAllowed: result.network?.allowed ?? [],
      aDenied: result.network?.denied.map(({ host, port, reason }) => ({ host, port, reason })),
    },
  };
}
