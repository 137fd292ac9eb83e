// Reads the server name (SNI) from the first TLS record a client sends, so a tunnel opened to one
// host cannot carry a TLS session meant for another (domain fronting).

/** What the first bytes of a tunnel are. */
export type FirstBytes =
  /** Not enough bytes yet to tell. */
  | { readonly kind: 'incomplete' }
  /** Bytes no TLS server reads as the start of TLS. */
  | { readonly kind: 'not-tls' }
  /**
   * A ClientHello; `serverName` when it carries an SNI host name, `encrypted` when it carries
   * an Encrypted Client Hello extension (the real server name is then inside, unreadable).
   */
  | {
      readonly kind: 'client-hello';
      readonly serverName: string | undefined;
      readonly encrypted: boolean;
    }
  /** The start of TLS, but not one well-formed ClientHello in one `16 03` record. */
  | { readonly kind: 'malformed' };

/**
 * Extension types that carry an encrypted inner ClientHello or server name: Encrypted Client
 * Hello (0xfe0d, the type the IETF drafts and their deployments settled on), the types earlier
 * ECH drafts used (0xfe08 to 0xfe0c, and 0xff02), none assigned to anything else, and ESNI's
 * encrypted_server_name (0xffce). Not 0xff01: that is renegotiation_info, in every ClientHello.
 */
const encryptedHelloExtensions: ReadonlySet<number> = new Set([
  0xfe0d, 0xfe0c, 0xfe0b, 0xfe0a, 0xfe09, 0xfe08, 0xff02, 0xffce,
]);

/** The largest first record read: a TLS record holds at most 2^14 bytes plus its 5-byte header. */
export const maxClientHelloBytes = 16_384 + 5;

/**
 * Classifies the bytes a client sent first (call again with more bytes while `incomplete`).
 *
 * The only TLS start read as TLS is a whole ClientHello in one `16 03` record. Lenient servers
 * accept other starts, so bytes such a server would read as TLS are `malformed`, never
 * `not-tls`, on every port: otherwise a ClientHello for another host (or for none) could follow
 * them unread. The starts, each read from a server's source:
 * - a handshake record that opens a ClientHello (type 1) with a record version below 0x1000.
 *   Go's crypto/tls takes any such version on the first record, and joins a ClientHello split
 *   over records;
 * - a warning alert (level 1, two bytes) with such a version, which Go skips before the
 *   ClientHello;
 * - an SSLv2-format ClientHello (length with the top bit set, type 1, version 3.x), which
 *   OpenSSL still accepts, naming no server;
 * - an empty change_cipher_spec record (type 0x14, length 0) with such a version: OpenSSL 3.0
 *   skips up to 32 empty records before the ClientHello (its record layer's MAX_EMPTY_RECORDS)
 *   and reads the hello behind them (attack round 36 had `evil.test` served so through a tunnel
 *   to `api.test:8443`). A non-empty one is refused by OpenSSL and Go before a ClientHello.
 *
 * Other bytes are plain data. A plaintext protocol whose first bytes take one of these shapes
 * is refused. For a little-endian length prefix that is a handshake-shaped start with odds of
 * about 1 in 65 536; for MongoDB's wire header it is certain when the first message's length
 * is 0x16 more than a multiple of 256 (below 4 KiB) and its request id is from 256 to 511, or
 * when the length is 0x14 more than a multiple of 256 (below 4 KiB) and the request id's low
 * byte is 0.
 */
export function readClientHello(data: Uint8Array): FirstBytes {
  if (data.length === 0) return { kind: 'incomplete' };
  const type = data[0] ?? 0;
  if (type & 0x80) {
    if (data.length < 4) return { kind: 'incomplete' };
    return data[2] === 0x01 && data[3] === 0x03 ? { kind: 'malformed' } : { kind: 'not-tls' };
  }
  if (type !== 0x14 && type !== 0x15 && type !== 0x16) return { kind: 'not-tls' };
  if (data.length >= 2 && (data[1] ?? 0) >= 0x10) return { kind: 'not-tls' };
  if (type === 0x14) {
    if (data.length < 5) return { kind: 'incomplete' };
    return data[3] === 0 && data[4] === 0 ? { kind: 'malformed' } : { kind: 'not-tls' };
  }
  if (data.length < 6) return { kind: 'incomplete' };
  const recordLength = ((data[3] ?? 0) << 8) | (data[4] ?? 0);
  if (type !== 0x16 || data[1] !== 0x03) {
    // An alert record's first byte is its level; a handshake record's, the message type.
    const lenient = data[5] === 0x01 && (type === 0x16 || recordLength === 2);
    return lenient ? { kind: 'malformed' } : { kind: 'not-tls' };
  }
  if (recordLength > 16_384 || recordLength < 4) return { kind: 'malformed' };
  if (data.length < 5 + recordLength) return { kind: 'incomplete' };
  const record = data.subarray(5, 5 + recordLength);
  try {
    return { kind: 'client-hello', ...namesOf(record) };
  } catch {
    return { kind: 'malformed' };
  }
}

/** Walks a ClientHello handshake message; throws on anything out of bounds. */
function namesOf(record: Uint8Array): { serverName: string | undefined; encrypted: boolean } {
  let offset = 0;
  const need = (count: number): void => {
    if (offset + count > record.length) throw new RangeError('truncated ClientHello');
  };
  const u8 = (): number => {
    need(1);
    return record[offset++] ?? 0;
  };
  const u16 = (): number => (u8() << 8) | u8();
  const skip = (count: number): void => {
    need(count);
    offset += count;
  };
  if (u8() !== 0x01) throw new RangeError('not a ClientHello');
  const bodyLength = (u8() << 16) | u16();
  // A ClientHello split over records puts the extensions beyond this one: refuse, not guess.
  // One that leaves bytes in its record could have another message start there (a second
  // ClientHello a lenient server reads): a first record holds the ClientHello alone.
  if (bodyLength + 4 !== record.length)
    throw new RangeError('ClientHello does not fill its record');
  skip(2 + 32); // version, random
  skip(u8()); // session id
  skip(u16()); // cipher suites
  skip(u8()); // compression methods
  const noExtensions = offset === 4 + bodyLength;
  if (noExtensions) return { serverName: undefined, encrypted: false };
  const extensionsEnd = offset + 2 + u16();
  if (extensionsEnd > 4 + bodyLength) throw new RangeError('extensions overrun');
  let name: string | undefined;
  let encrypted = false;
  while (offset < extensionsEnd) {
    const type = u16();
    const length = u16();
    const end = offset + length;
    if (end > extensionsEnd) throw new RangeError('extension overruns');
    if (encryptedHelloExtensions.has(type)) encrypted = true;
    if (type === 0) {
      if (name !== undefined) throw new RangeError('two server_name extensions');
      const listEnd = offset + 2 + u16();
      while (offset < listEnd) {
        const nameType = u8();
        const nameLength = u16();
        need(nameLength);
        const bytes = record.subarray(offset, offset + nameLength);
        offset += nameLength;
        if (nameType !== 0) continue;
        if (name !== undefined) throw new RangeError('two host names');
        // A host name is ASCII (RFC 6066); anything else is refused, not decoded leniently.
        if (!bytes.every((byte) => byte > 0x20 && byte < 0x7f))
          throw new RangeError('non-ASCII name');
        name = Buffer.from(bytes).toString('latin1').toLowerCase().replace(/\.$/, '');
      }
    }
    offset = end;
  }
  return { serverName: name, encrypted };
}
