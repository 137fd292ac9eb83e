// One run's proxy, allowed loopback (`allowPrivate` and a 127.0.0.0/8 entry), asked for another
// run's listener in every way its protocols name a destination: HTTP CONNECT (literal, mapped
// IPv6, a name), SOCKS5 (IPv4, IPv6 mapped, a domain, an IPv4 literal sent as a domain) and
// plain absolute-form HTTP (literal, mapped IPv6 in hex). Held: each refused `private-address`
// (SOCKS5 reply 0x02, "connection not allowed by ruleset", RFC 1928), and the other listener
// never sees a connection (its report stays empty).
import { connect, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type EgressListener, EgressProxy } from '../src/egress/egress-proxy.ts';
import { tableLookup } from './support/egress-servers.ts';

let proxy: EgressProxy;
let a: EgressListener;
let b: EgressListener;
let aPort: number;
let bPort: number;

beforeAll(async () => {
  proxy = new EgressProxy({ lookup: tableLookup({ 'loop.test': '127.0.0.1' }) });
  b = await proxy.openTcp({ allow: ['api.test'] });
  a = await proxy.openTcp({ allow: ['loop.test', '127.0.0.0/8'], allowPrivate: true });
  aPort = (a.address as { port: number }).port;
  bPort = (b.address as { port: number }).port;
});

afterAll(async () => {
  await proxy?.close();
});

/** Sends `writes` (the next after each answer); resolves with the answer to the last one. */
function exchange(writes: Buffer[]): Promise<Buffer> {
  return new Promise((resolve) => {
    const socket: Socket = connect(aPort, '127.0.0.1');
    const chunks: Buffer[] = [];
    socket.once('connect', () => socket.write(writes.shift()!));
    socket.on('data', (chunk) => {
      chunks.push(chunk);
      const next = writes.shift();
      if (next !== undefined) return void socket.write(next);
      // An opened tunnel would wait for more: the answer is all this needs.
      socket.destroy();
    });
    socket.on('error', () => {});
    socket.setTimeout(10_000, () => socket.destroy());
    socket.once('close', () => resolve(Buffer.concat(chunks)));
  });
}

const firstLine = async (request: string): Promise<string> =>
  (await exchange([Buffer.from(request)])).toString('latin1').split('\r\n')[0]!;

/** SOCKS5: no-auth greeting, then CONNECT to `address` (ATYP and bytes); the reply code. */
async function socks(type: number, address: Buffer): Promise<number> {
  const port = Buffer.from([bPort >> 8, bPort & 0xff]);
  const answer = await exchange([
    Buffer.from([0x05, 0x01, 0x00]),
    Buffer.concat([Buffer.from([0x05, 0x01, 0x00, type]), address, port]),
  ]);
  return answer[3] ?? -1; // after the method choice (05 00): 05 REP
}

const mapped = Buffer.from([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 1]);
const domain = (name: string) => Buffer.concat([Buffer.from([name.length]), Buffer.from(name)]);

describe("another run's listener, by every form its proxy reads (held)", () => {
  it('refused private-address in each; the other listener sees nothing', async () => {
    const told = {
      'CONNECT literal': await firstLine(`CONNECT 127.0.0.1:${bPort} HTTP/1.1\r\n\r\n`),
      'CONNECT mapped': await firstLine(`CONNECT [::ffff:127.0.0.1]:${bPort} HTTP/1.1\r\n\r\n`),
      'CONNECT name': await firstLine(`CONNECT loop.test:${bPort} HTTP/1.1\r\n\r\n`),
      'SOCKS5 IPv4': await socks(0x01, Buffer.from([127, 0, 0, 1])),
      'SOCKS5 IPv6 mapped': await socks(0x04, mapped),
      'SOCKS5 domain': await socks(0x03, domain('loop.test')),
      'SOCKS5 literal as domain': await socks(0x03, domain('127.0.0.1')),
      'GET literal': await firstLine(
        `GET http://127.0.0.1:${bPort}/ HTTP/1.1\r\nHost: 127.0.0.1:${bPort}\r\n\r\n`,
      ),
      'GET mapped hex': await firstLine(
        `GET http://[::ffff:7f00:1]:${bPort}/ HTTP/1.1\r\nHost: [::ffff:7f00:1]:${bPort}\r\n\r\n`,
      ),
    };
    const forbidden = 'HTTP/1.1 403 Forbidden';
    expect({
      told,
      aReasons: a.session.report().denied.map(({ reason }) => reason),
      aAllowed: a.session.report().allowed,
      b: b.session.report(),
    }).toEqual({
      told: {
        'CONNECT literal': forbidden,
        'CONNECT mapped': forbidden,
        'CONNECT name': forbidden,
        'SOCKS5 IPv4': 0x02,
        'SOCKS5 IPv6 mapped': 0x02,
        'SOCKS5 domain': 0x02,
        'SOCKS5 literal as domain': 0x02,
        'GET literal': forbidden,
        'GET mapped hex': forbidden,
      },
      aReasons: Array(9).fill('private-address'),
      aAllowed: [],
      b: { allowed: [], denied: [] },
    });
  });
});
