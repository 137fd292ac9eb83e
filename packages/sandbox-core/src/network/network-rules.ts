// A NetworkPolicy compiled for checking: names against the patterns, then every address the
// name resolved to against the address classes and the CIDR entries.

import { validate } from '../limits/validate.ts';
import {
  type AddressClass,
  classifyAddress,
  embeddedIpv4,
  isSpecialRange,
  neverClasses,
  privateClasses,
} from './address-class.ts';
import { type HostPattern, normalizeHostName, parseHostPattern } from './host-pattern.ts';
import {
  formatIpAddress,
  type IpAddress,
  type IpRange,
  inRange,
  parseIpAddress,
  unmapIpv4,
} from './ip-address.ts';
import type { NetworkDenialReason, NetworkPolicy } from './network-policy.ts';
import { NetworkPolicySchema } from './network-policy.ts';

/** The outcome of a check: allowed, or refused with a reason. */
export type NetworkVerdict =
  | {
      /** Allowed. */
      readonly ok: true;
    }
  | {
      /** Refused. */
      readonly ok: false;
      /** Why, as a stable code. */
      readonly reason: NetworkDenialReason;
      /** Why, in words. */
      readonly detail: string;
    };

/** A destination named by a program: an IP literal or a host name (normalized). */
export type Destination =
  | {
      /** An IP literal. */
      readonly kind: 'ip';
      /** The address (IPv4-mapped IPv6 unwrapped). */
      readonly address: IpAddress;
      /** The address as text, canonical. */
      readonly text: string;
    }
  | {
      /** A host name. */
      readonly kind: 'name';
      /** The name, lowercase, without a trailing dot. */
      readonly host: string;
    };

const allowed: NetworkVerdict = Object.freeze({ ok: true });

function refuse(reason: NetworkDenialReason, detail: string): NetworkVerdict {
  return { ok: false, reason, detail };
}

/** Checks destinations against one validated {@link NetworkPolicy}. */
export class NetworkRules {
  readonly #allow: readonly HostPattern[];
  readonly #deny: readonly HostPattern[];
  readonly #allowPrivate: boolean;
  /** The policy as validated. */
  readonly policy: Readonly<NetworkPolicy>;

  /** Validates `policy` (throws `SandboxValidationError` naming each bad entry). */
  constructor(policy: NetworkPolicy) {
    this.policy = Object.freeze(validate(NetworkPolicySchema, policy, 'network policy'));
    const parse = (entries: readonly string[], list: 'allow' | 'deny'): HostPattern[] =>
      entries.map((entry) => parseHostPattern(entry, list) as HostPattern);
    this.#allow = parse(this.policy.allow, 'allow');
    this.#deny = parse(this.policy.deny ?? [], 'deny');
    this.#allowPrivate = this.policy.allowPrivate ?? false;
  }

  /** Reads a host as a program named it: an IP literal, a host name, or a refusal. */
  static destination(host: string): Destination | NetworkVerdict {
    const address = parseIpAddress(host);
    if (address !== undefined)
      return { kind: 'ip', address: unmapIpv4(address), text: formatIpAddress(address) };
    const name = normalizeHostName(host);
    if ('error' in name) return refuse('invalid-host', name.error);
    return { kind: 'name', host: name.host };
  }

  /**
   * Whether the policy lets a program ask for `host:port`, before any name is resolved.
   * `hostAddresses` as for {@link checkResolved}: an IPv6 form of the host's own address is
   * named only by an entry for that address.
   */
  checkDestination(
    destination: Destination,
    port: number,
    hostAddresses: readonly (IpAddress | IpRange)[] = [],
  ): NetworkVerdict {
    if (destination.kind === 'ip') {
      if (this.#denies(destination.address, port)) {
        return refuse('denied', `${destination.text} matches a deny entry`);
      }
      if (neverClasses.has(classifyAddress(destination.address))) {
        return refuse(
          'private-address',
          `${destination.text} (${classifyAddress(destination.address)}) is never reached`,
        );
      }
      if (this.#allows(destination.address, port, hostAddresses, () => true)) return allowed;
      // A range that holds the address but also spans public space (isSpecialRange) is named in
      // the refusal: the entry seems to allow it.
      const wide = this.#allow.some((pattern) =>
        matchesAddress(pattern, unmapIpv4(destination.address), port),
      );
      const kind = classifyAddress(destination.address, hostAddresses);
      return refuse(
        'ip-literal',
        wide
          ? `${destination.text} (${kind}) is an IP address no allow entry names: only its IP or a CIDR inside special-purpose ranges reaches a ${kind} address`
          : `${destination.text} is an IP address no allow entry names`,
      );
    }
    if (this.#deny.some((pattern) => matchesName(pattern, destination.host, port))) {
      return refuse('denied', `${destination.host}:${port} matches a deny entry`);
    }
    return this.#allow.some((pattern) => matchesName(pattern, destination.host, port))
      ? allowed
      : refuse('not-allowed', `${destination.host}:${port} matches no allow entry`);
  }

  /**
   * Whether a connection to `address` (one the name resolved to) may be made. `hostAddresses`
   * are what the host delivers to itself (class `host`): its addresses and `local` route ranges.
   */
  checkResolved(
    address: IpAddress,
    port: number,
    hostAddresses: readonly (IpAddress | IpRange)[] = [],
  ): NetworkVerdict {
    const plain = unmapIpv4(address);
    const text = formatIpAddress(plain);
    if (this.#denies(plain, port)) {
      return refuse('denied', `resolved to ${text}, which matches a deny entry`);
    }
    const kind: AddressClass = classifyAddress(plain, hostAddresses);
    if (neverClasses.has(kind)) return refuse('private-address', `resolved to ${text} (${kind})`);
    if (kind === 'public') return allowed;
    if (this.#allows(plain, port, hostAddresses, (pattern) => pattern.kind === 'cidr')) {
      return allowed;
    }
    if (this.#allowPrivate && privateClasses.has(kind)) return allowed;
    return refuse('private-address', `resolved to ${text} (${kind})`);
  }

  /**
   * Whether an allow entry (of those `eligible` picks) names `address`. An address that carries
   * an IPv4 one a gateway forwards to (NAT64, IPv4-translated, 6to4) is named by an entry for
   * that IPv4 address; an entry for the IPv6 form itself (`64:ff9b::/96`) names it only when the
   * IPv4 inside is public and the address is not the host's, so a wide IPv6 range never reaches
   * loopback, metadata or the host through it.
   */
  #allows(
    address: IpAddress,
    port: number,
    hostAddresses: readonly (IpAddress | IpRange)[],
    eligible: (pattern: HostPattern) => boolean,
  ): boolean {
    const inner = embeddedIpv4(address);
    // A CIDR reaches a special address only when it lies inside special space (isSpecialRange).
    const names = (target: IpAddress) => {
      const special = classifyAddress(target, hostAddresses) !== 'public';
      return this.#allow.some(
        (pattern) =>
          eligible(pattern) &&
          matchesAddress(pattern, target, port) &&
          (!special || pattern.kind !== 'cidr' || isSpecialRange(pattern.range, hostAddresses)),
      );
    };
    if (inner === undefined) return names(address);
    return names(inner) || (classifyAddress(address, hostAddresses) === 'public' && names(address));
  }

  /**
   * Whether a deny entry names `address` (IPv4-mapped already unwrapped). An entry for an IPv4
   * address or range also covers the IPv6 forms a gateway forwards to it (NAT64,
   * IPv4-translated, 6to4), as the address classes do, whether a name resolved to it or the
   * program named it.
   */
  #denies(address: IpAddress, port: number): boolean {
    const inner = embeddedIpv4(address);
    return this.#deny.some(
      (pattern) =>
        matchesAddress(pattern, address, port) ||
        (inner !== undefined && matchesAddress(pattern, inner, port)),
    );
  }
}

function portMatches(pattern: HostPattern, port: number): boolean {
  return pattern.port === undefined || pattern.port === port;
}

function matchesName(pattern: HostPattern, host: string, port: number): boolean {
  if (!portMatches(pattern, port)) return false;
  if (pattern.kind === 'host') return pattern.host === host;
  if (pattern.kind === 'suffix') return host.endsWith(`.${pattern.suffix}`);
  return false;
}

function matchesAddress(pattern: HostPattern, address: IpAddress, port: number): boolean {
  if (!portMatches(pattern, port)) return false;
  if (pattern.kind === 'cidr') return inRange(address, pattern.range);
  if (pattern.kind !== 'ip') return false;
  // Entries hold IPv4-mapped forms unwrapped, as addresses are checked (see parseHostPattern).
  const named = pattern.address;
  return (
    named.family === address.family && named.bytes.every((byte, i) => byte === address.bytes[i])
  );
}
