// A TLS 1.3 server that wants a different key share answers the first ClientHello with a
// HelloRetryRequest, and the client then sends a second ClientHello, in the clear like the
// first. A tunnel's check of the first hello alone let a client name the allowed host there and
// another host in the second, which a shared front (OpenSSL, a CDN) then served (RFC 8446
// §4.1.2 says the second must match, but servers do not all hold clients to it). So after the
// first hello, the client's next bytes wait until the server's first record says whether it
// asked again; if it did, the second hello is read for the same checks.
import type { Socket } from 'node:net';
import { type FirstBytes, maxClientHelloBytes, readClientHello } from './client-hello.ts';

/** The `random` of a ServerHello that is a HelloRetryRequest (RFC 8446 §4.1.3). */
const helloRetryRandom = Buffer.from(
  'cf21ad74e59a6111be1d8c021e65b891c2a211167abb8c5e079e09e2c8a8339c',
  'hex',
);

/** Handshake bytes that tell a ServerHello's kind: type, length, version, random. */
const serverHelloStart = 4 + 2 + 32;
/**
 * Server bytes read to tell, at most: a ServerHello's start may be split over many tiny records
 * (RFC 8446 lets handshake messages span records). Past this, undecided counts as a retry, so
 * the client's next bytes are checked rather than passed unread.
 */
const maxServerBytes = 1024;

/**
 * Whether a server's first bytes are a HelloRetryRequest, are not, or cannot tell yet. The
 * ServerHello's start is put together from consecutive handshake records.
 */
export function isHelloRetryRequest(data: Buffer): 'yes' | 'no' | 'incomplete' {
  const handshake: Buffer[] = [];
  let have = 0;
  let offset = 0;
  let warnings = 0;
  while (have < serverHelloStart) {
    if (data.length <= offset) return undecided(data);
    if (data.length < offset + 5) return undecided(data);
    // A warning alert before the ServerHello is skipped by OpenSSL's clients, which then answer
    // a HelloRetryRequest after it: skipped here too (a few at most).
    if (isWarningAlert(data, offset) && warnings < maxWarnings && handshake.length === 0) {
      if (data.length < offset + 7) return undecided(data);
      warnings += 1;
      offset += 7;
      continue;
    }
    if (data[offset] !== 0x16) return 'no'; // not a handshake record
    const end = offset + 5 + data.readUInt16BE(offset + 3);
    const payload = data.subarray(offset + 5, Math.min(end, data.length));
    handshake.push(payload);
    have += payload.length;
    if (handshake[0]!.length > 0 && handshake[0]![0] !== 0x02) return 'no'; // not a ServerHello
    if (end > data.length) break;
    offset = end;
  }
  if (have < serverHelloStart) return undecided(data);
  const start = Buffer.concat(handshake);
  if (start[0] !== 0x02) return 'no';
  return start.subarray(6, serverHelloStart).equals(helloRetryRandom) ? 'yes' : 'no';
}

/** Warning alerts skipped before a ServerHello. */
const maxWarnings = 4;

/** Whether the record at `offset` is an alert of two bytes whose level is warning (1). */
function isWarningAlert(data: Buffer, offset: number): boolean {
  return (
    data[offset] === 0x15 &&
    data.readUInt16BE(offset + 3) === 2 &&
    (data.length <= offset + 5 || data[offset + 5] === 0x01)
  );
}

/** Not enough to tell: wait for more, unless the server has sent too much to wait any longer. */
function undecided(data: Buffer): 'yes' | 'incomplete' {
  return data.length >= maxServerBytes ? 'yes' : 'incomplete';
}

/** The client's held bytes, and its second ClientHello when the server asked for one. */
export interface AfterFirstHello {
  /** What the client sent after its first hello, held back until now: to pass on, counted. */
  readonly held: Buffer;
  /** After a HelloRetryRequest: the client's second hello, read like the first. */
  readonly retried: FirstBytes | undefined;
}

/**
 * Holds what `client` sends after its first ClientHello (starting with `alreadySent`, the bytes
 * that came in the hello's own reads) until `server`'s first record shows
 * whether it is a HelloRetryRequest, and after one until the client's second ClientHello is
 * whole (change_cipher_spec records before it are skipped). The server's bytes keep flowing to
 * the client meanwhile (another listener passes them on). Resolves undefined when either side
 * closes or `timeoutMs` passes first.
 */
export function afterFirstHello(
  client: Socket,
  server: Socket,
  alreadySent: Buffer,
  timeoutMs: number,
): Promise<AfterFirstHello | undefined> {
  return new Promise((resolve) => {
    let fromServer = Buffer.alloc(0);
    let held = alreadySent;
    let asked: 'yes' | 'no' | 'incomplete' = 'incomplete';
    const finish = (value: AfterFirstHello | undefined): void => {
      clearTimeout(timer);
      server.off('data', onServer);
      server.off('close', onClose);
      client.off('data', onClient);
      client.off('close', onClose);
      client.pause();
      resolve(value);
    };
    const decide = (): void => {
      if (asked === 'incomplete') return;
      if (asked === 'no') {
        finish({ held, retried: undefined });
        return;
      }
      // change_cipher_spec records first, each waited for whole (they may come split).
      let offset = 0;
      while (held.length > offset && held[offset] === 0x14) {
        if (held.length < offset + 5) return;
        const end = offset + 5 + held.readUInt16BE(offset + 3);
        if (held.length < end) return;
        offset = end;
      }
      if (held.length <= offset) return;
      const retried = readClientHello(held.subarray(offset));
      if (retried.kind === 'incomplete' && held.length - offset < maxClientHelloBytes) return;
      finish({ held, retried });
    };
    const onServer = (chunk: Buffer): void => {
      if (asked !== 'incomplete') return;
      fromServer = Buffer.concat([fromServer, chunk]).subarray(0, maxServerBytes);
      asked = isHelloRetryRequest(fromServer);
      decide();
    };
    const onClient = (chunk: Buffer): void => {
      held = Buffer.concat([held, chunk]);
      // Nothing the client sends here is needed past one record and a change_cipher_spec:
      // more waits in its socket (backpressure) rather than in the host's memory.
      if (held.length > 2 * maxClientHelloBytes) client.pause();
      decide();
    };
    const onClose = (): void => finish(undefined);
    const timer = setTimeout(() => finish(undefined), timeoutMs);
    server.on('data', onServer);
    server.once('close', onClose);
    client.on('data', onClient);
    client.once('close', onClose);
    client.resume();
  });
}
