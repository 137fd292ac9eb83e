// A Landlock run's proxy listener is a TCP port on the host's 127.0.0.1. docs/security.md said
// other sandboxes' runs cannot reach it (their Landlock rules name their own port). Through
// their own proxy they can, when their policy reaches loopback (`allowPrivate`, or a loopback
// CIDR): a tunnel to 127.0.0.1:PORT of another run's listener, and a request inside it, which
// that run's proxy judges by that run's policy and counts in that run's report. Found by this
// attack round: run A (allowed only `loop.test`, a name for 127.0.0.1) fetched `api.test`, which
// only run B allows; A's report showed `loop.test`, B's showed A's request as its own.
// Expected here, from the policies alone: A reaches nothing A's policy does not name, the API
// server sees no request, B's report stays empty.
import { createInterface } from 'node:readline';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSandbox, type SubprocessSandbox } from '../src/index.ts';
import { startHttp, type TestServer, tableLookup } from './support/egress-servers.ts';
import { useLandlockBackend } from './support/fake-bwrap.ts';
import { python } from './support/helpers.ts';

let api: TestServer;
let requests = 0;
let a: SubprocessSandbox;
let b: SubprocessSandbox;

// bubblewrap refused, as in a container: the Landlock backend runs the commands.
useLandlockBackend();

beforeAll(async () => {
  api = await startHttp((_request, response) => {
    requests++;
    response.end('api secret\n');
  });
  a = createSandbox(
    { network: { allow: ['loop.test'], allowPrivate: true }, timeoutMs: 30_000 },
    { lookup: tableLookup({ 'loop.test': '127.0.0.1' }) },
  );
  b = createSandbox(
    { network: { allow: ['api.test'], allowPrivate: true }, timeoutMs: 30_000 },
    { lookup: tableLookup({ 'api.test': api.address }) },
  );
});

afterAll(async () => {
  await a?.close();
  await b?.close();
  await api?.close();
});

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

describe("a run's proxy listener, from another run's proxy", () => {
  it("a tunnel into another run's listener is refused; its policy and report are not another's (broke: fixed in sandbox-core admit.ts)", async () => {
    // Run B holds its listener open: it prints the port and waits.
    const holder = b.spawn(python, [
      '-c',
      "import os, sys; print(os.environ['HTTP_PROXY'].rsplit(':', 1)[1], flush=True); sys.stdin.read()",
    ]);
    const lines = createInterface({ input: holder.stdout })[Symbol.asyncIterator]();
    const other = Number((await lines.next()).value);
    const apiAuthority = `api.test:${api.port}`;
    const result = await a.run(python, ['-c', chain, String(other), apiAuthority]);
    holder.stdin.end();
    await holder.exited;
    expect(result.stderr).toBe('');
    expect({
      told: result.stdout.split('\n')[0],
      requests,
      bAllowed: holder.network?.report().allowed,
      aAllowed: result.network?.allowed ?? [],
      aDenied: result.network?.denied.map(({ host, port, reason }) => ({ host, port, reason })),
    }).toEqual({
      told: 'connect HTTP/1.1 403 Forbidden',
      requests: 0,
      bAllowed: [],
      aAllowed: [],
      aDenied: [{ host: 'loop.test', port: other, reason: 'private-address' }],
    });
  });
});
