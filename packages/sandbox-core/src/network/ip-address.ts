// Parses IP address literals strictly (dotted-quad IPv4, RFC 4291 IPv6) into bytes, and tests
// them against CIDR ranges. Pure JS, so every layer (and a browser) can use it.

/** An IP address as bytes: 4 for IPv4, 16 for IPv6. */
export interface IpAddress {
  /** 4 or 6. */
  readonly family: 4 | 6;
  /** Network-order bytes: 4 of them for IPv4, 16 for IPv6. */
  readonly bytes: readonly number[];
}

/** A CIDR range: an address and how many leading bits must match. */
export interface IpRange {
  /** The first address of the range. */
  readonly address: IpAddress;
  /** Leading bits that must match (0 to 32 for IPv4, 0 to 128 for IPv6). */
  readonly prefix: number;
}

const ipv4Pattern = /^(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(\.(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)){3}$/;

/** Parses `a.b.c.d` (decimal, no leading zeros, as RFC 6943 asks), else undefined. */
export function parseIpv4(text: string): IpAddress | undefined {
  if (!ipv4Pattern.test(text)) return undefined;
  return { family: 4, bytes: text.split('.').map(Number) };
}

/** Parses an IPv6 address (with `::` and a trailing dotted IPv4 allowed, no zone), else undefined. */
export function parseIpv6(text: string): IpAddress | undefined {
  if (text.length > 45 || !/^[0-9a-fA-F:.]+$/.test(text)) return undefined;
  const halves = text.split('::');
  if (halves.length > 2) return undefined;
  const groups = (part: string): number[] | undefined => {
    if (part === '') return [];
    const out: number[] = [];
    const pieces = part.split(':');
    for (const [index, piece] of pieces.entries()) {
      if (index === pieces.length - 1 && piece.includes('.')) {
        const v4 = parseIpv4(piece);
        if (v4 === undefined) return undefined;
        const [a = 0, b = 0, c = 0, d = 0] = v4.bytes;
        out.push((a << 8) | b, (c << 8) | d);
        continue;
      }
      if (!/^[0-9a-fA-F]{1,4}$/.test(piece)) return undefined;
      out.push(Number.parseInt(piece, 16));
    }
    return out;
  };
  const head = groups(halves[0] ?? '');
  const tail = halves.length === 2 ? groups(halves[1] ?? '') : [];
  if (head === undefined || tail === undefined) return undefined;
  const missing = 8 - head.length - tail.length;
  if (halves.length === 2 ? missing < 1 : missing !== 0) return undefined;
  const all = [...head, ...Array<number>(missing).fill(0), ...tail];
  return { family: 6, bytes: all.flatMap((group) => [group >> 8, group & 0xff]) };
}

/** Parses an IPv4 or IPv6 literal (IPv6 optionally in brackets), else undefined. */
export function parseIpAddress(text: string): IpAddress | undefined {
  const bare = text.startsWith('[') && text.endsWith(']') ? text.slice(1, -1) : text;
  return parseIpv4(bare) ?? parseIpv6(bare);
}

/** Parses `address/prefix`, refusing host bits set past the prefix, else undefined. */
export function parseIpRange(text: string): IpRange | undefined {
  const slash = text.indexOf('/');
  if (slash < 0) return undefined;
  const address = parseIpAddress(text.slice(0, slash));
  const prefixText = text.slice(slash + 1);
  if (address === undefined || !/^\d{1,3}$/.test(prefixText)) return undefined;
  const prefix = Number(prefixText);
  if (prefix > address.bytes.length * 8) return undefined;
  const range = { address, prefix };
  return inRange(address, range) && sameAsNetwork(address, prefix) ? range : undefined;
}

function sameAsNetwork(address: IpAddress, prefix: number): boolean {
  return address.bytes.every((byte, index) => {
    const keep = Math.max(0, Math.min(8, prefix - index * 8));
    const mask = keep === 0 ? 0 : (0xff << (8 - keep)) & 0xff;
    return (byte & ~mask & 0xff) === 0;
  });
}

/** Whether `address` lies in `range` (families must agree; see {@link unmapIpv4}). */
export function inRange(address: IpAddress, range: IpRange): boolean {
  if (address.family !== range.address.family) return false;
  for (let bit = 0; bit < range.prefix; bit += 1) {
    const index = bit >> 3;
    const mask = 0x80 >> (bit & 7);
    if (((address.bytes[index] ?? 0) & mask) !== ((range.address.bytes[index] ?? 0) & mask)) {
      return false;
    }
  }
  return true;
}

/** The IPv4 address inside an IPv4-mapped IPv6 one (`::ffff:a.b.c.d`), else the address itself. */
export function unmapIpv4(address: IpAddress): IpAddress {
  if (address.family !== 6) return address;
  const b = address.bytes;
  const mapped = b.slice(0, 10).every((byte) => byte === 0) && b[10] === 0xff && b[11] === 0xff;
  return mapped ? { family: 4, bytes: b.slice(12) } : address;
}

/** The canonical text of an address (IPv6 compressed, lowercase), as Node's `net` prints it. */
export function formatIpAddress(address: IpAddress): string {
  if (address.family === 4) return address.bytes.join('.');
  const groups: number[] = [];
  for (let i = 0; i < 16; i += 2)
    groups.push(((address.bytes[i] ?? 0) << 8) | (address.bytes[i + 1] ?? 0));
  let bestStart = -1;
  let bestLength = 1;
  for (let start = 0; start < 8; start += 1) {
    let length = 0;
    while (start + length < 8 && groups[start + length] === 0) length += 1;
    if (length > bestLength) {
      bestStart = start;
      bestLength = length;
    }
  }
  const hex = groups.map((group) => group.toString(16));
  if (bestStart < 0) return hex.join(':');
  return `${hex.slice(0, bestStart).join(':')}::${hex.slice(bestStart + bestLength).join(':')}`;
}
