// Domain fronting through a TLS 1.3 HelloRetryRequest (found by stop 33's attack round): the
// first ClientHello names the tunnel's host, the server asks for another, and the second names
// a different host, which a shared front (OpenSSL's s_server was measured) then served. The
// server here stands in for such a front at the byte level: it answers the first record with a
// HelloRetryRequest and records everything after it, so the test sees exactly what reached it.
import { createServer } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { captureClientHello } from './support/client-hello-bytes.ts';
import { randomLoopback } from './support/egress-servers.ts';
import { openFrontTunnel, waitFor } from './support/front-tunnel.ts';

/** A ServerHello record whose random is RFC 8446's HelloRetryRequest value. */
const helloRetryRequest = Buffer.concat([
  Buffer.from([0x16, 0x03, 0x03, 0x00, 0x28, 0x02, 0x00, 0x00, 0x24, 0x03, 0x03]),
  Buffer.from('cf21ad74e59a6111be1d8c021e65b891c2a211167abb8c5e079e09e2c8a8339c', 'hex'),
  Buffer.from([0x00, 0x13, 0x01, 0x00]), // no session id, TLS_AES_128_GCM_SHA256, no compression
]);
/** A plain ServerHello start (random of zeros): no second hello is asked for. */
const serverHello = Buffer.concat([
  Buffer.from([0x16, 0x03, 0x03, 0x00, 0x28, 0x02, 0x00, 0x00, 0x24, 0x03, 0x03]),
  Buffer.alloc(32),
  Buffer.from([0x00, 0x13, 0x01, 0x00]),
]);
const changeCipherSpec = Buffer.from([0x14, 0x03, 0x03, 0x00, 0x01, 0x01]);

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/**
 * The stand-in front on port 443: answers the first record (by its length, however the bytes
 * arrive) with `answer`, or with nothing when `answer` is undefined; keeps what follows it.
 */
async function front(
  answer: Buffer | undefined,
): Promise<{ address: string; afterFirst: () => Buffer }> {
  const address = randomLoopback();
  let rest = Buffer.alloc(0);
  const server = createServer((socket) => {
    socket.on('error', () => {});
    let got = Buffer.alloc(0);
    let answered = false;
    socket.on('data', (chunk: Buffer) => {
      if (answered) {
        rest = Buffer.concat([rest, chunk]);
        return;
      }
      got = Buffer.concat([got, chunk]);
      if (got.length < 5 || got.length < 5 + got.readUInt16BE(3)) return;
      answered = true;
      rest = got.subarray(5 + got.readUInt16BE(3));
      if (answer !== undefined) socket.write(answer);
    });
  });
  await new Promise<void>((resolve) => server.listen(443, address, resolve));
  cleanups.push(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return { address, afterFirst: () => rest };
}

/** CONNECT api.test:443, the first hello, then (once the server answered) `then`. */
async function tunnel(
  frontAddress: string,
  first: Buffer,
  then: Buffer,
  answerBytes = serverHello.length,
  pieces: Buffer[] = [],
) {
  const { socket, received, closed, report } = await openFrontTunnel(frontAddress, 443, cleanups);
  socket.write(first);
  await waitFor(() => received().length >= answerBytes);
  const answered = Buffer.from(received());
  if (then.length > 0) socket.write(then);
  // Later pieces, each in its own segment.
  for (const piece of pieces) {
    await new Promise((resolve) => setTimeout(resolve, 50));
    socket.write(piece);
  }
  await Promise.race([closed, new Promise((resolve) => setTimeout(resolve, 1_000))]);
  socket.destroy();
  return { answered, report: report() };
}

describe('a second ClientHello after a HelloRetryRequest', () => {
  it('naming another host is refused, and none of it reaches the server', async () => {
    const server = await front(helloRetryRequest);
    const first = await captureClientHello('api.test');
    const second = Buffer.concat([changeCipherSpec, await captureClientHello('evil.test')]);
    const { answered, report } = await tunnel(server.address, first, second);
    expect(answered.equals(helloRetryRequest)).toBe(true); // the client got the server's request
    expect(report.denied).toEqual([
      {
        host: 'api.test',
        port: 443,
        reason: 'sni-mismatch',
        detail:
          "after the server's HelloRetryRequest, the TLS ClientHello names evil.test; the tunnel is for api.test",
      },
    ]);
    expect(server.afterFirst().length).toBe(0);
  });

  it('sent with the first in one write is held with it: refused, none of it reaches the server', async () => {
    const server = await front(helloRetryRequest);
    const first = await captureClientHello('api.test');
    const both = Buffer.concat([first, changeCipherSpec, await captureClientHello('evil.test')]);
    const { report } = await tunnel(server.address, both, Buffer.alloc(0));
    expect(report.denied.map(({ reason, detail }) => [reason, detail])).toEqual([
      [
        'sni-mismatch',
        "after the server's HelloRetryRequest, the TLS ClientHello names evil.test; the tunnel is for api.test",
      ],
    ]);
    expect(server.afterFirst().length).toBe(0);
  });

  it('is waited for 10 s at most: a server that never answers the first is reported', async () => {
    const server = await front(undefined);
    const { socket, closed, report } = await openFrontTunnel(server.address, 443, cleanups);
    const cut = closed.then(() => performance.now());
    const started = performance.now();
    socket.write(await captureClientHello('api.test'));
    expect((await cut) - started).toBeGreaterThan(9_900);
    expect(report().denied).toEqual([
      {
        host: 'api.test',
        port: 443,
        reason: 'unreachable',
        detail: 'no answer to the TLS ClientHello within 10000 ms',
      },
    ]);
  }, 20_000);

  it('is read across records: a HelloRetryRequest split in two still has the second hello checked', async () => {
    // RFC 8446 lets a handshake message span records: the same request in a 4- and a 36-byte one.
    const body = helloRetryRequest.subarray(5);
    const split = Buffer.concat([
      Buffer.from([0x16, 0x03, 0x03, 0x00, 0x04]),
      body.subarray(0, 4),
      Buffer.from([0x16, 0x03, 0x03, 0x00, body.length - 4]),
      body.subarray(4),
    ]);
    const server = await front(split);
    const first = await captureClientHello('api.test');
    const second = Buffer.concat([changeCipherSpec, await captureClientHello('evil.test')]);
    const { report } = await tunnel(server.address, first, second, split.length);
    expect(report.denied.map(({ reason }) => reason)).toEqual(['sni-mismatch']);
    expect(server.afterFirst().length).toBe(0); // before: the second hello reached the server
  });

  it('sees a HelloRetryRequest behind a warning alert, which OpenSSL clients skip', async () => {
    const alert = Buffer.from([0x15, 0x03, 0x03, 0x00, 0x02, 0x01, 0x70]); // unrecognized_name
    const answer = Buffer.concat([alert, helloRetryRequest]);
    const server = await front(answer);
    const first = await captureClientHello('api.test');
    const second = Buffer.concat([changeCipherSpec, await captureClientHello('evil.test')]);
    const { report } = await tunnel(server.address, first, second, answer.length);
    expect(report.denied.map(({ reason }) => reason)).toEqual(['sni-mismatch']);
    expect(server.afterFirst().length).toBe(0); // before: read as no request, passed unchecked
  });

  it('waits for a change_cipher_spec that comes in pieces, then passes the right second hello', async () => {
    const server = await front(helloRetryRequest);
    const first = await captureClientHello('api.test');
    const second = await captureClientHello('api.test');
    const { report } = await tunnel(
      server.address,
      first,
      changeCipherSpec.subarray(0, 3),
      helloRetryRequest.length,
      [changeCipherSpec.subarray(3), second],
    );
    expect(report.denied).toEqual([]); // before: protocol, no second ClientHello
    const sent = Buffer.concat([changeCipherSpec, second]);
    await waitFor(() => server.afterFirst().length === sent.length);
    expect(server.afterFirst().equals(sent)).toBe(true);
  });

  it('naming the tunnel’s host passes whole, change_cipher_spec first', async () => {
    const server = await front(helloRetryRequest);
    const first = await captureClientHello('api.test');
    const second = Buffer.concat([changeCipherSpec, await captureClientHello('api.test')]);
    const { report } = await tunnel(server.address, first, second);
    expect(report.denied).toEqual([]);
    await waitFor(() => server.afterFirst().length === second.length);
    expect(server.afterFirst().equals(second)).toBe(true);
  });

  it('is not looked for after a plain ServerHello: what follows passes unread', async () => {
    const server = await front(serverHello);
    const first = await captureClientHello('api.test');
    // Bytes a ClientHello reader would refuse: after a ServerHello they are the session's own.
    const later = Buffer.concat([changeCipherSpec, await captureClientHello('evil.test')]);
    const { report } = await tunnel(server.address, first, later);
    expect(report.denied).toEqual([]);
    await waitFor(() => server.afterFirst().length === later.length);
    expect(server.afterFirst().equals(later)).toBe(true);
  });
});
