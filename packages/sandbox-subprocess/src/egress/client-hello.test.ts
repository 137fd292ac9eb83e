// The ClientHello reader on real ClientHellos (Node's TLS client, captured by a bare TCP server)
// and on the ways a hostile client can bend one.
import { describe, expect, it } from 'vitest';
import {
  captureClientHello as capture,
  echBody,
  withExtension,
} from '../../test/support/client-hello-bytes.ts';
import { readClientHello } from './client-hello.ts';

describe('readClientHello', () => {
  it('reads the server name of a real ClientHello, lowercased', async () => {
    expect(readClientHello(await capture('API.Example.test'))).toEqual({
      kind: 'client-hello',
      serverName: 'api.example.test',
      encrypted: false,
    });
  });

  it('reports a ClientHello without SNI (Node sends none for an IP)', async () => {
    expect(readClientHello(await capture(undefined))).toEqual({
      kind: 'client-hello',
      serverName: undefined,
      encrypted: false,
    });
  });

  it('tells an Encrypted Client Hello (0xfe0d) and the draft ESNI (0xffce) from other extensions', async () => {
    const hello = await capture('a.test');
    const table: [number, boolean][] = [
      [0xfe0d, true],
      [0xffce, true],
      [0xfe0c, false], // a neighbouring number, an extension nobody assigned
      [0x4469, false], // application settings, which Chromium sends beside ECH
    ];
    for (const [type, encrypted] of table) {
      expect(readClientHello(withExtension(hello, type, echBody))).toEqual({
        kind: 'client-hello',
        serverName: 'a.test',
        encrypted,
      });
    }
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
