// Real TLS ClientHellos for the tests, and a way to bend one: Node's TLS client sends no
// Encrypted Client Hello, so the tests add the extension to a real hello.
import { createServer } from 'node:net';
import { connect } from 'node:tls';

/** The first bytes Node's TLS client sends for `servername` (undefined: none sent). */
export async function captureClientHello(servername: string | undefined): Promise<Buffer> {
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

/**
 * The shape of an outer Encrypted Client Hello extension's body: outer type 0, a cipher suite
 * (HKDF-SHA256, AES-128-GCM), a config id, a 32-byte encapsulated key and a payload. The proxy
 * reads only the extension's type; the rest is there to look like the real thing.
 */
export const echBody: Buffer = Buffer.concat([
  Buffer.from([0x00, 0x00, 0x01, 0x00, 0x01, 0x2a, 0x00, 0x20]),
  Buffer.alloc(32, 7),
  Buffer.from([0x00, 0x40]),
  Buffer.alloc(64, 9),
]);

/**
 * `hello` (one TLS record holding a ClientHello) with extension `type` and `body` appended at the
 * end of its extension list, the three lengths that enclose it (extensions, handshake message,
 * record) grown to match.
 */
export function withExtension(hello: Uint8Array, type: number, body: Uint8Array): Buffer {
  const record = Buffer.from(hello);
  let offset = 5 + 4 + 2 + 32; // record header, handshake header, version, random
  offset += 1 + (record[offset] ?? 0); // session id
  offset += 2 + record.readUInt16BE(offset); // cipher suites
  offset += 1 + (record[offset] ?? 0); // compression methods
  const extensionsLengthAt = offset;
  const added = 4 + body.length;
  const extension = Buffer.alloc(added);
  extension.writeUInt16BE(type, 0);
  extension.writeUInt16BE(body.length, 2);
  extension.set(body, 4);
  const out = Buffer.concat([record.subarray(0, 5 + record.readUInt16BE(3)), extension]);
  out.writeUInt16BE(out.readUInt16BE(3) + added, 3);
  const handshakeLength = out.readUIntBE(6, 3) + added;
  out.writeUIntBE(handshakeLength, 6, 3);
  out.writeUInt16BE(out.readUInt16BE(extensionsLengthAt) + added, extensionsLengthAt);
  return out;
}
