// The egress policy every layer shares: which hosts a command, a parser or an isolate tool may
// reach, and what a run reports about what it reached and what it was refused.
import { z } from 'zod';
import { parseHostPattern } from './host-pattern.ts';

/** One allow/deny entry, refused with the parser's reason when it is not a pattern. */
const patternSchema = (list: 'allow' | 'deny') =>
  z.string().superRefine((entry, context) => {
    const parsed = parseHostPattern(entry, list);
    if ('error' in parsed) context.addIssue({ code: 'custom', message: parsed.error });
  });

/** The egress policy ({@link NetworkPolicy}). */
export const NetworkPolicySchema = z.strictObject({
  allow: z.array(patternSchema('allow')).max(1024),
  deny: z.array(patternSchema('deny')).max(1024).optional(),
  allowPrivate: z.boolean().optional(),
  allowEncryptedClientHello: z.boolean().optional(),
  maxEgressBytes: z.number().int().positive().optional(),
});

/**
 * Where a command, a parser or an isolate tool may connect. Each entry of `allow` and `deny` is
 * an exact host (`registry.npmjs.org`), a suffix (`*.githubusercontent.com`: any subdomain, not
 * the name itself), an IP literal (`10.0.0.5`, `[fd00::1]:8443`) or a CIDR range
 * (`10.0.0.0/8`), each but a CIDR with an optional `:port` (no port: any port). Names are
 * resolved on the host and every address is checked, on every connection: loopback, private,
 * CGNAT and the host's own addresses need `allowPrivate` or a CIDR in `allow`; link-local and
 * cloud metadata addresses need a CIDR; multicast and unspecified addresses are never reached.
 * A CIDR reaches those classes only when it lies wholly inside special-purpose space
 * (`10.0.0.0/8`, `169.254.0.0/16`, the host's own ranges); one that also spans public
 * addresses (`0.0.0.0/1`) reaches public addresses only.
 * An IP literal is reached only when an IP or CIDR entry names it.
 */
export interface NetworkPolicy {
  /** Patterns a destination must match (up to 1 024). An empty list refuses everything. */
  allow: string[];
  /** Patterns refused even when `allow` matches (up to 1 024); checked first. Default none. */
  deny?: string[] | undefined;
  /**
   * Let names resolve to loopback, private (RFC 1918, unique local), CGNAT and the host's own
   * addresses. Never link-local or metadata addresses (those need a CIDR). Default `false`.
   */
  allowPrivate?: boolean | undefined;
  /**
   * Let a CONNECT or SOCKS5 tunnel carry a TLS ClientHello with the Encrypted Client Hello
   * extension (ECH, type 0xfe0d, the earlier drafts' types, or ESNI's 0xffce). ECH puts the
   * real server name in an encrypted inner ClientHello: a server in front of many sites (a CDN)
   * then serves the inner name, whatever outer name the tunnel's check saw, so a tunnel to one
   * allowed host reaches every site behind the same server. Refused by default
   * (`sni-mismatch`).
   * Chromium sends the extension in every ClientHello (as GREASE when it has no ECH key for the
   * site), so a Chromium-based browser going through the proxy needs `true`. The isolate's
   * fetch tool makes its own TLS connections and ignores it. Default `false`.
   */
  allowEncryptedClientHello?: boolean | undefined;
  /**
   * Bytes a run may move through the proxy, both directions together; beyond it, open
   * connections are cut and new ones refused (`egress-limit`). The isolate's fetch tool counts
   * it per execution: request bodies sent and response bodies read. Default: no cap.
   */
  maxEgressBytes?: number | undefined;
}

/**
 * Why a connection was refused: `not-allowed` (no allow entry matches), `denied` (a deny entry
 * matches), `ip-literal` (an address no IP or CIDR entry names), `invalid-host` (not a host
 * name), `private-address` (the name resolved to an address of a refused class),
 * `resolve-failed`, `sni-mismatch` (the TLS server name is not the host the tunnel was opened
 * to, is missing, or is hidden by Encrypted Client Hello), `host-mismatch` (the `Host` header
 * names another host),
 * `protocol` (not HTTP, CONNECT or SOCKS5, or an unsupported request), `egress-limit`
 * (`maxEgressBytes` reached), `unreachable` (allowed, but the server could not be reached).
 */
export type NetworkDenialReason =
  | 'not-allowed'
  | 'denied'
  | 'ip-literal'
  | 'invalid-host'
  | 'private-address'
  | 'resolve-failed'
  | 'sni-mismatch'
  | 'host-mismatch'
  | 'protocol'
  | 'egress-limit'
  | 'unreachable';

/** A destination a run reached, with the bytes it moved there. */
export interface NetworkAllowedEntry {
  /** The host as the program named it (lowercase). */
  host: string;
  /** The port. */
  port: number;
  /** Bytes moved, both directions together. */
  bytes: number;
  /** Bytes the program sent there. */
  bytesSent: number;
  /** Bytes it received from there. */
  bytesReceived: number;
  /** Connections (or proxied requests) made. */
  connections: number;
}

/** A refused connection. */
export interface NetworkDeniedEntry {
  /** The host as the program named it (lowercase), or the address. */
  host: string;
  /** The port (0 when the request named none that could be read). */
  port: number;
  /** Why, as a stable code. */
  reason: NetworkDenialReason;
  /** Why, in words (`resolved to 127.0.0.1 (loopback)`). */
  detail: string;
}

/** What a run did on the network. Allowed entries are one per host and port. */
export interface NetworkReport {
  /** Destinations reached, with byte counts. */
  allowed: NetworkAllowedEntry[];
  /** Connections refused, in order. */
  denied: NetworkDeniedEntry[];
}

/** One connection allowed or refused, as it happens. */
export type NetworkEvent =
  | {
      /** A connection was allowed. */
      type: 'allowed';
      /** The host as the program named it. */
      host: string;
      /** The port. */
      port: number;
      /** The address the proxy connected to. */
      address: string;
    }
  | ({
      /** A connection was refused. */
      type: 'denied';
    } & NetworkDeniedEntry);
