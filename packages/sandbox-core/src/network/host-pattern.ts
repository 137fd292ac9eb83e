// One entry of an egress allow or deny list: an exact host, a `*.` suffix, an IP literal or a
// CIDR range, with an optional port. Parsing refuses anything else with a reason.
import {
  formatIpAddress,
  type IpAddress,
  type IpRange,
  inRange,
  parseIpAddress,
  parseIpRange,
  unmapIpv4,
} from './ip-address.ts';

/** A parsed allow/deny entry. */
export type HostPattern =
  | {
      /** An exact host name. */
      readonly kind: 'host';
      /** The name, lowercase, without a trailing dot. */
      readonly host: string;
      /** The port it applies to; undefined for any port. */
      readonly port: number | undefined;
    }
  | {
      /** `*.suffix`: any subdomain of the suffix, not the suffix itself. */
      readonly kind: 'suffix';
      /** The suffix after `*.`, lowercase. */
      readonly suffix: string;
      /** The port it applies to; undefined for any port. */
      readonly port: number | undefined;
    }
  | {
      /** One IP address. */
      readonly kind: 'ip';
      /** The address. */
      readonly address: IpAddress;
      /** The port it applies to; undefined for any port. */
      readonly port: number | undefined;
    }
  | {
      /** A CIDR range. */
      readonly kind: 'cidr';
      /** The range. */
      readonly range: IpRange;
      /** Always undefined: a range applies to every port. */
      readonly port: undefined;
    };

const label = /^(?!-)[a-z0-9_-]{1,63}(?<!-)$/;

/**
 * A host name as the policy compares it (lowercase, no trailing dot), or the reason it is not
 * one. A last label that is all digits or `0x…` is refused: resolvers read such a "name"
 * (`2130706433`, `0x7f.1`) as an IPv4 address.
 */
export function normalizeHostName(text: string): { host: string } | { error: string } {
  const host = text.toLowerCase().replace(/\.$/, '');
  if (host.length === 0 || host.length > 253)
    return { error: 'expected a host name of 1 to 253 characters' };
  const labels = host.split('.');
  if (!labels.every((part) => label.test(part))) {
    return { error: 'expected a host name of letters, digits, "-" and "_" between dots' };
  }
  const last = labels.at(-1) ?? '';
  if (/^(\d+|0x[0-9a-f]*)$/.test(last)) {
    return { error: 'a numeric last label reads as an IP address; write the address itself' };
  }
  return { host };
}

function parsePort(text: string): number | undefined {
  if (!/^\d{1,5}$/.test(text)) return undefined;
  const port = Number(text);
  return port >= 1 && port <= 65_535 ? port : undefined;
}

// Every address is checked with IPv4-mapped IPv6 forms unwrapped (`::ffff:10.0.0.1` is
// 10.0.0.1), so an entry is held in the same form: a mapped entry as its IPv4 address or range.
const mappedBlock: IpRange = { address: parseIpAddress('::ffff:0:0')!, prefix: 96 };

/**
 * A CIDR entry in the form addresses are checked in. A mapped range becomes its IPv4 range; a
 * shorter IPv6 range that holds the whole mapped block is refused (it would match none of the
 * IPv4 addresses it seems to name), and so is a range of every address (`/0`), as `*` is.
 */
function cidrPattern(written: IpRange, list: 'allow' | 'deny'): HostPattern | { error: string } {
  const mapped = written.address.family === 6 && written.prefix >= 96;
  const range =
    mapped && inRange(written.address, mappedBlock)
      ? { address: unmapIpv4(written.address), prefix: written.prefix - 96 }
      : written;
  // A wide deny range is what it says (`::/0`: every IPv6 address); only an allow range is
  // refused for being every address, or for seeming to name IPv4 addresses it cannot match.
  if (list === 'deny') return { kind: 'cidr', range, port: undefined };
  if (range.prefix === 0) {
    return {
      error:
        'a range of every address (/0) is refused, as "*" is: name the ranges (allowNetwork: true gives the whole network)',
    };
  }
  if (range.address.family === 6 && range.prefix < 96 && inRange(mappedBlock.address, range)) {
    return {
      error:
        'holds the IPv4-mapped block ::ffff:0:0/96, whose addresses are checked as IPv4: write IPv4 ranges for them and a narrower IPv6 range',
    };
  }
  return { kind: 'cidr', range, port: undefined };
}

/**
 * Parses one entry of the `allow` (default) or `deny` list, or returns why it is refused. An
 * allow range of every address (`/0`) or holding the IPv4-mapped block is refused; a deny range
 * is taken as written.
 */
export function parseHostPattern(
  entry: string,
  list: 'allow' | 'deny' = 'allow',
): HostPattern | { error: string } {
  const text = entry.trim();
  if (text === '*' || text === '*.*') {
    return { error: 'a pattern for every host is not an allowlist; use allowNetwork: true' };
  }
  if (text.includes('/')) {
    const range = parseIpRange(text);
    if (range === undefined) {
      return { error: 'expected a CIDR range such as 10.0.0.0/8 (no host bits set, no port)' };
    }
    return cidrPattern(range, list);
  }
  let hostPart = text;
  let port: number | undefined;
  const bracketed = /^\[([^\]]+)\](?::(.*))?$/.exec(text);
  if (bracketed !== null) {
    hostPart = bracketed[1] ?? '';
    if (bracketed[2] !== undefined) {
      port = parsePort(bracketed[2]);
      if (port === undefined) return { error: 'expected a port from 1 to 65535 after ":"' };
    }
    const address = parseIpAddress(hostPart);
    return address?.family === 6
      ? { kind: 'ip', address: unmapIpv4(address), port }
      : { error: 'expected an IPv6 address inside [ ]' };
  }
  if (text.split(':').length > 2) {
    const address = parseIpAddress(text);
    return address === undefined
      ? { error: 'expected an IPv6 address (write [address]:port for a port)' }
      : { kind: 'ip', address: unmapIpv4(address), port: undefined };
  }
  const colon = text.lastIndexOf(':');
  if (colon >= 0) {
    hostPart = text.slice(0, colon);
    port = parsePort(text.slice(colon + 1));
    if (port === undefined) return { error: 'expected a port from 1 to 65535 after ":"' };
  }
  const address = parseIpAddress(hostPart);
  if (address !== undefined) return { kind: 'ip', address: unmapIpv4(address), port };
  if (hostPart.startsWith('*.')) {
    const name = normalizeHostName(hostPart.slice(2));
    if ('error' in name) return { error: `after "*.": ${name.error}` };
    return { kind: 'suffix', suffix: name.host, port };
  }
  if (hostPart.includes('*')) return { error: '"*" is only allowed as a leading "*." label' };
  const name = normalizeHostName(hostPart);
  if ('error' in name) return name;
  return { kind: 'host', host: name.host, port };
}

/** The pattern as text, for reports. */
export function formatHostPattern(pattern: HostPattern): string {
  const port = pattern.port === undefined ? '' : `:${pattern.port}`;
  switch (pattern.kind) {
    case 'host':
      return `${pattern.host}${port}`;
    case 'suffix':
      return `*.${pattern.suffix}${port}`;
    case 'ip':
      return pattern.address.family === 6 && port !== ''
        ? `[${formatIpAddress(pattern.address)}]${port}`
        : `${formatIpAddress(pattern.address)}${port}`;
    case 'cidr':
      return `${formatIpAddress(pattern.range.address)}/${pattern.range.prefix}`;
  }
}
