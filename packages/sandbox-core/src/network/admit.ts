// One admission, as every layer does it: read the host a program named, check it against the
// rules, resolve a name (with the caller's resolver) and check every address it gave. The
// caller connects to the address returned, so no second resolution can change it.
import type { IpAddress, IpRange } from './ip-address.ts';
import { parseIpAddress } from './ip-address.ts';
import type { NetworkDenialReason } from './network-policy.ts';
import { NetworkRules } from './network-rules.ts';
import { isProxyListener } from './proxy-listeners.ts';

/** Resolves a host name to its addresses (a layer passes the system resolver or a test's). */
export type NetworkLookup = (
  hostname: string,
) => Promise<readonly { readonly address: string; readonly family: number }[]>;

/** The outcome of {@link admitDestination}. */
export type Admission =
  | {
      /** Admitted. */
      readonly ok: true;
      /** The host as the program named it (normalized), or the address it named. */
      readonly host: string;
      /** The port. */
      readonly port: number;
      /** The checked address to connect to. */
      readonly address: string;
      /** Its family. */
      readonly family: 4 | 6;
    }
  | {
      /** Refused. */
      readonly ok: false;
      /** The host as the program named it (normalized when it could be read). */
      readonly host: string;
      /** The port. */
      readonly port: number;
      /** Why, as a stable code. */
      readonly reason: NetworkDenialReason;
      /** Why, in words. */
      readonly detail: string;
    };

/**
 * Admits `host:port` under `rules`: an IP literal only when an entry names it; a name when the
 * patterns allow it and every address `lookup` gives passes (one refused address refuses all).
 * Never one of this process's egress proxy listeners (proxy-listeners.ts). `hostAddresses`
 * are what the host delivers to itself (see {@link hostLocalAddresses}). Never throws.
 */
export async function admitDestination(
  rules: NetworkRules,
  host: string,
  port: number,
  lookup: NetworkLookup,
  hostAddresses: readonly (IpAddress | IpRange)[] = [],
): Promise<Admission> {
  const refuse = (named: string, reason: NetworkDenialReason, detail: string): Admission => ({
    ok: false,
    host: named,
    port,
    reason,
    detail,
  });
  const destination = NetworkRules.destination(host);
  if ('ok' in destination) {
    return destination.ok
      ? refuse(host.toLowerCase(), 'invalid-host', 'unreadable host')
      : refuse(host.toLowerCase(), destination.reason, destination.detail);
  }
  const named = destination.kind === 'name' ? destination.host : destination.text;
  const verdict = rules.checkDestination(destination, port, hostAddresses);
  if (!verdict.ok) return refuse(named, verdict.reason, verdict.detail);
  const proxyListener = (address: string): Admission =>
    refuse(
      named,
      'private-address',
      `${address}:${port} is a listener of this host's egress proxy (another run's way out)`,
    );
  if (destination.kind === 'ip') {
    if (isProxyListener(destination.address, port)) return proxyListener(destination.text);
    return {
      ok: true,
      host: named,
      port,
      address: destination.text,
      family: destination.address.family,
    };
  }
  let found: readonly { readonly address: string; readonly family: number }[];
  try {
    found = await lookup(named);
  } catch (error) {
    return refuse(
      named,
      'resolve-failed',
      `could not resolve ${named}: ${(error as Error).message}`,
    );
  }
  if (found.length === 0) return refuse(named, 'resolve-failed', `${named} has no address`);
  let first: { address: string; family: 4 | 6 } | undefined;
  for (const candidate of found) {
    const parsed = parseIpAddress(candidate.address);
    if (parsed === undefined) {
      return refuse(
        named,
        'resolve-failed',
        `the resolver gave ${JSON.stringify(candidate.address)}`,
      );
    }
    const check = rules.checkResolved(parsed, port, hostAddresses);
    if (!check.ok) return refuse(named, check.reason, check.detail);
    if (isProxyListener(parsed, port)) return proxyListener(candidate.address);
    first ??= { address: candidate.address, family: parsed.family };
  }
  return { ok: true, host: named, port, ...first! };
}
