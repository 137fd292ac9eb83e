// Run by host-local-addresses.test.ts inside a private network namespace it has set up: for each
// address given, the real egress proxy is asked for http://pub.test:PORT/ with pub.test
// resolving to that address (an address this namespace delivers to itself, which Node's list of
// interfaces may not show), while a server listens on the wildcard address. Prints one JSON line
// per address: the proxy's status line, the denial it reported, and whether the server was reached.
import { connect, createServer } from 'node:net';
import { EgressProxy } from '../../src/egress/egress-proxy.ts';

const reachedBy = new Set<string>();
const server = createServer((socket) => {
  reachedBy.add(socket.localAddress ?? '');
  socket.end('HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok');
});
await new Promise<void>((resolve) => server.listen(0, '::', resolve));
const { port } = server.address() as { port: number };

for (const address of process.argv.slice(2)) {
  const proxy = new EgressProxy({
    lookup: async () => [{ address, family: address.includes(':') ? 6 : 4 }],
  });
  const listener = await proxy.openTcp({ allow: ['pub.test'] });
  if (!('port' in listener.address)) throw new Error('openTcp gave no port');
  const proxyPort = listener.address.port;
  const reply = await new Promise<string>((resolve) => {
    const socket = connect(proxyPort, '127.0.0.1');
    let text = '';
    socket.on('data', (chunk: Buffer) => {
      text += chunk.toString('latin1');
    });
    socket.on('close', () => resolve(text));
    socket.write(
      `GET http://pub.test:${port}/ HTTP/1.1\r\nHost: pub.test:${port}\r\nConnection: close\r\n\r\n`,
    );
  });
  const denied = listener.session.report().denied.map(({ reason, detail }) => ({ reason, detail }));
  console.log(
    JSON.stringify({
      address,
      status: reply.split('\r\n')[0],
      denied,
      reached: [...reachedBy].some((local) => local.replace(/^::ffff:/, '') === address),
    }),
  );
  await listener.close();
  await proxy.close();
}
server.close();
