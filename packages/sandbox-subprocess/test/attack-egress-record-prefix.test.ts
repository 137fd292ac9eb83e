// Domain fronting on a non-443 port behind empty change_cipher_spec records (attack round 36).
// OpenSSL (3.0 measured, through Node's TLS server here) skips up to 32 empty records before
// the ClientHello (its record layer's MAX_EMPTY_RECORDS), a change_cipher_spec record among
// them, and then reads the ClientHello behind them. The proxy read a first byte 0x14 as "not
// TLS", so on any port but 443 the bytes went through unread: a tunnel opened to api.test:8443
// carried a ClientHello for evil.test, and a shared front served evil.test.
import { connect } from 'node:net';
import { createSecureContext, createServer as createTlsServer } from 'node:tls';
import { afterEach, describe, expect, it } from 'vitest';
import { captureClientHello } from './support/client-hello-bytes.ts';
import { makeCertificate, randomLoopback } from './support/egress-servers.ts';
import { openFrontConnection, openFrontTunnel, waitFor } from './support/front-tunnel.ts';

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** An empty change_cipher_spec record, TLS 1.2 record version. */
const emptyChangeCipherSpec = Buffer.from([0x14, 0x03, 0x03, 0x00, 0x00]);

/** A TLS front (OpenSSL through Node) on port 8443 of a random loopback address; records each SNI name. */
async function front(): Promise<{ address: string; names: string[] }> {
  const certificate = makeCertificate(['api.test', 'evil.test']);
  const context = createSecureContext(certificate);
  const names: string[] = [];
  const server = createTlsServer({
    ...certificate,
    SNICallback: (name, callback) => {
      names.push(name);
      callback(null, context);
    },
  });
  server.on('tlsClientError', () => {});
  const address = randomLoopback();
  await new Promise<void>((resolve) => server.listen(8443, address, resolve));
  cleanups.push(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return { address, names };
}

/** CONNECT api.test:8443, then `bytes`; returns what came back through the tunnel. */
async function tunnel(frontAddress: string, bytes: Buffer) {
  const { socket, established, received, closed, report } = await openFrontTunnel(
    frontAddress,
    8443,
    cleanups,
  );
  socket.write(bytes);
  await Promise.race([closed, waitFor(() => received().length >= 5, 1_500)]);
  socket.destroy();
  return { established, answer: Buffer.from(received()), report: report() };
}

describe('a ClientHello behind empty change_cipher_spec records, port 8443', () => {
  it('the control: OpenSSL reads the name behind them when nothing is in between', async () => {
    // Independent of the proxy: straight to the front, the prefixed hello for evil.test is read.
    const server = await front();
    const hello = await captureClientHello('evil.test');
    const socket = connect(8443, server.address);
    socket.on('error', () => {});
    let answer = Buffer.alloc(0);
    socket.on('data', (chunk: Buffer) => {
      answer = Buffer.concat([answer, chunk]);
    });
    socket.write(Buffer.concat([emptyChangeCipherSpec, emptyChangeCipherSpec, hello]));
    await waitFor(() => answer.length >= 5);
    socket.destroy();
    expect(server.names).toEqual(['evil.test']);
    expect([...answer.subarray(0, 3)]).toEqual([0x16, 0x03, 0x03]); // a ServerHello record
  });

  it('one empty record before a hello naming another host is refused; the front never reads it', async () => {
    const server = await front();
    const hello = await captureClientHello('evil.test');
    const { established, answer, report } = await tunnel(
      server.address,
      Buffer.concat([emptyChangeCipherSpec, hello]),
    );
    expect(established.startsWith('HTTP/1.1 200 ')).toBe(true);
    expect(server.names).toEqual([]);
    expect(answer.length).toBe(0);
    expect(report.denied).toEqual([
      { host: 'api.test', port: 8443, reason: 'protocol', detail: 'a malformed TLS record' },
    ]);
  });

  it('five empty records, then the hello: refused the same way', async () => {
    const server = await front();
    const hello = await captureClientHello('evil.test');
    const prefix = Buffer.concat(Array.from({ length: 5 }, () => emptyChangeCipherSpec));
    const { answer, report } = await tunnel(server.address, Buffer.concat([prefix, hello]));
    expect(server.names).toEqual([]);
    expect(answer.length).toBe(0);
    expect(report.denied).toEqual([
      { host: 'api.test', port: 8443, reason: 'protocol', detail: 'a malformed TLS record' },
    ]);
  });

  it('over SOCKS5 too: refused, and the front never reads the name', async () => {
    const server = await front();
    const hello = await captureClientHello('evil.test');
    const { socket, received, report } = await openFrontConnection(server.address, cleanups);
    const name = Buffer.from('api.test');
    socket.write(Buffer.from([0x05, 0x01, 0x00]));
    socket.write(
      Buffer.concat([
        Buffer.from([0x05, 0x01, 0x00, 0x03, name.length]),
        name,
        Buffer.from([0x20, 0xfb]),
      ]),
    );
    await waitFor(() => received().length >= 12);
    expect([...received().subarray(0, 4)]).toEqual([0x05, 0x00, 0x05, 0x00]); // granted
    socket.write(Buffer.concat([emptyChangeCipherSpec, hello]));
    await new Promise((resolve) => setTimeout(resolve, 500));
    socket.destroy();
    expect(server.names).toEqual([]);
    expect(received().length).toBe(12);
    expect(report().denied).toEqual([
      { host: 'api.test', port: 8443, reason: 'protocol', detail: 'a malformed TLS record' },
    ]);
  });

  it('a hello for the tunnel host itself still passes on 8443 (no prefix)', async () => {
    const server = await front();
    const hello = await captureClientHello('api.test');
    const { answer, report } = await tunnel(server.address, hello);
    expect(server.names).toEqual(['api.test']);
    expect([...answer.subarray(0, 3)]).toEqual([0x16, 0x03, 0x03]);
    expect(report.denied).toEqual([]);
  });
});
