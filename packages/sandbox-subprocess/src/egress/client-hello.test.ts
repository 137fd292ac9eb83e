// The ClientHello reader on real ClientHellos (Node's TLS client, captured by a bare TCP server)
// and on the ways a hostile client can bend one.
import { createServer } from 'node:net';
import { connect } from 'node:tls';
import { describe, expect, it } from 'vitest';
import { readClientHello } from './client-hello.ts';

/** The first bytes Node's TLS client sends for `servername` (undefined: none sent). */
async function capture(servername: string | undefined): Promise<Buffer> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  const first = new Promise<Buffer>((resolve) =>
    server.once('connection', (socket) =>
      socket.once('data', (data: Buffer) => {
        resolve(data);
        socket.destroy();
      }),
    ),
  );
  const client = connect({
    host: '127.0.0.1',
    port,
    ...(servername === undefined ? {} : { servername }),
  });
  client.on('error', () => {});
  const data = await first;
  client.destroy();
  server.close();
  return data;
}

describe('readClientHello', () => {
  it('reads the server name of a real ClientHello, lowercased', async () => {
    expect(readClientHello(await capture('API.Example.test'))).toEqual({
      kind: 'client-hello',
      serverName: 'api.example.test',
    });
  });

  it('reports a ClientHello without SNI (Node sends none for an IP)', async () => {
    expect(readClientHello(await capture(undefined))).toEqual({
      kind: 'client-hello',
      serverName: undefined,
    });
  });

  it('waits for the whole first record, and tells plain text from TLS', async () => {
    const hello = await capture('a.test');
    expect(readClientHello(hello.subarray(0, 3))).toEqual({ kind: 'incomplete' });
    expect(readClientHello(hello.subarray(0, hello.length - 1))).toEqual({ kind: 'incomplete' });
    expect(readClientHello(Buffer.from('GET / HTTP/1.1\r\n'))).toEqual({ kind: 'not-tls' });
    expect(readClientHello(Buffer.from([0x16, 0x01, 0x00]))).toEqual({ kind: 'not-tls' });
  });

  it('refuses a ClientHello bent out of shape', async () => {
    const hello = await capture('a.test');
    const bigger = Buffer.from(hello);
    bigger.writeUInt8(0xff, 6); // the handshake length now runs past the record
    expect(readClientHello(bigger)).toEqual({ kind: 'malformed' });
    const oversized = Buffer.from(hello);
    oversized.writeUInt16BE(0x4001, 3); // a record longer than TLS allows
    expect(readClientHello(oversized)).toEqual({ kind: 'malformed' });
    const notHello = Buffer.from(hello);
    notHello.writeUInt8(0x02, 5); // a ServerHello type
    expect(readClientHello(notHello)).toEqual({ kind: 'malformed' });
  });
});
