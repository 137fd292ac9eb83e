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

  it("tells an Encrypted Client Hello (0xfe0d, its drafts' types, ESNI's 0xffce) from other extensions", async () => {
    const hello = await capture('a.test');
    const table: [number, boolean][] = [
      [0xfe0d, true],
      [0xffce, true],
      [0xfe08, true], // an earlier ECH draft's type
      [0xfe0c, true], // an earlier ECH draft's type
      [0xff02, true], // an earlier ECH draft's type
      [0xfe0e, false], // a neighbouring number nobody assigned
      [0xff01, false], // renegotiation_info, in every ClientHello
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
    expect(readClientHello(Buffer.from([0x16, 0x01, 0x00]))).toEqual({ kind: 'incomplete' });
  });

  it('calls malformed every start a lenient TLS server (Go, OpenSSL) reads as TLS, and only those', async () => {
    const hello = await capture('evil.test');
    const recordVersion = (version: number): Buffer => {
      const changed = Buffer.from(hello);
      changed.writeUInt16BE(version, 1);
      return changed;
    };
    // The ClientHello's handshake message split over two records, the first with `version`.
    const split = (version: number): Buffer => {
      const message = hello.subarray(5);
      const half = Math.floor(message.length / 2);
      const record = (part: Buffer, recordVersion: number) =>
        Buffer.concat([
          Buffer.from([
            0x16,
            recordVersion >> 8,
            recordVersion & 0xff,
            part.length >> 8,
            part.length & 0xff,
          ]),
          part,
        ]);
      return Buffer.concat([
        record(message.subarray(0, half), version),
        record(message.subarray(half), 0x0301),
      ]);
    };
    const table: [string, Buffer, string][] = [
      [
        'a warning alert, then the ClientHello',
        Buffer.concat([Buffer.from([0x15, 0x03, 0x01, 0x00, 0x02, 0x01, 0x5a]), hello]),
        'malformed',
      ],
      [
        'an alert with version 00 00',
        Buffer.from([0x15, 0x00, 0x00, 0x00, 0x02, 0x01, 0x5a]),
        'malformed',
      ],
      [
        'a change_cipher_spec first (Go refuses it before a ClientHello)',
        Buffer.concat([Buffer.from([0x14, 0x03, 0x03, 0x00, 0x01, 0x01]), hello]),
        'not-tls',
      ],
      [
        'an empty change_cipher_spec, then the ClientHello (OpenSSL 3.0 skips empty records)',
        Buffer.concat([Buffer.from([0x14, 0x03, 0x03, 0x00, 0x00]), hello]),
        'malformed',
      ],
      [
        'an empty change_cipher_spec with version 00 01',
        Buffer.concat([Buffer.from([0x14, 0x00, 0x01, 0x00, 0x00]), hello]),
        'malformed',
      ],
      [
        'MongoDB header: length 0x114, request id 256 (a documented false refusal)',
        Buffer.from([0x14, 0x01, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00]),
        'malformed',
      ],
      [
        'a fatal alert first (Go skips only warnings)',
        Buffer.concat([Buffer.from([0x15, 0x03, 0x01, 0x00, 0x02, 0x02, 0x28]), hello]),
        'not-tls',
      ],
      [
        'an SSLv2-format ClientHello (OpenSSL accepts it, with no server name)',
        Buffer.from([0x80, 0x2e, 0x01, 0x03, 0x03, 0x00, 0x15, 0x00, 0x00, 0x00, 0x10]),
        'malformed',
      ],
      [
        'a high first byte that is no SSLv2 hello',
        Buffer.from([0x80, 0x2e, 0x02, 0x00]),
        'not-tls',
      ],
      [
        'MongoDB header: length 0x114, request id 1',
        Buffer.from([0x14, 0x01, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00]),
        'not-tls',
      ],
      [
        'MongoDB header: length 0x115, request id 2',
        Buffer.from([0x15, 0x01, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00]),
        'not-tls',
      ],
      [
        'MongoDB header: length 0x116, request id 256 (a documented false refusal)',
        Buffer.from([0x16, 0x01, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00]),
        'malformed',
      ],
      ['record version 00 01', recordVersion(0x0001), 'malformed'],
      ['record version 0f ff', recordVersion(0x0fff), 'malformed'],
      ['split over records, the first 16 00 01', split(0x0001), 'malformed'],
      ['split over records, the first 16 03 01', split(0x0301), 'malformed'],
      ['record version 10 00 (no server reads it)', recordVersion(0x1000), 'not-tls'],
      [
        'an alert-shaped start of 3 bytes',
        Buffer.from([0x15, 0x03, 0x01, 0x00, 0x03, 0x01, 0x5a, 0x00]),
        'not-tls',
      ],
      [
        'a handshake-shaped start that is no ClientHello',
        Buffer.from([0x16, 0x01, 0x00, 0x00, 0x2a, 0x07, 0x00]),
        'not-tls',
      ],
      [
        'application data first',
        Buffer.from([0x17, 0x03, 0x03, 0x00, 0x02, 0x00, 0x00]),
        'not-tls',
      ],
      [
        'a 16 03 record holding a ServerHello',
        Buffer.from([0x16, 0x03, 0x01, 0x00, 0x04, 0x02, 0x00, 0x00, 0x00]),
        'malformed',
      ],
    ];
    expect(table.map(([name, bytes]) => [name, readClientHello(bytes).kind])).toEqual(
      table.map(([name, , kind]) => [name, kind]),
    );
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
    // More in the record than the ClientHello: where a second hello could start unread.
    const trailing = Buffer.concat([hello, Buffer.from([0x01, 0x00, 0x00, 0x00])]);
    trailing.writeUInt16BE(hello.length - 5 + 4, 3);
    expect(readClientHello(trailing)).toEqual({ kind: 'malformed' });
  });
});
