// Which kind of destination an IP address is: the table of special-purpose ranges (RFC 6890 and
// the IANA registries) an egress policy refuses unless told otherwise. Data, not code.
import { type IpAddress, type IpRange, inRange, parseIpRange, unmapIpv4 } from './ip-address.ts';

/**
 * The kind of destination an address is. `public` is everything not in the table;
 * `host` is one of the host's own interface addresses (given by the caller).
 */
export type AddressClass =
  | 'public'
  | 'loopback'
  | 'private'
  | 'cgnat'
  | 'link-local'
  | 'metadata'
  | 'multicast'
  | 'unspecified'
  | 'reserved'
  | 'host';

/** Classes a policy's `allowPrivate: true` lets through; the rest need an explicit CIDR. */
export const privateClasses: ReadonlySet<AddressClass> = new Set([
  'loopback',
  'private',
  'cgnat',
  'host',
]);

/** Classes no policy entry can let through: nothing sensible is reached there. */
export const neverClasses: ReadonlySet<AddressClass> = new Set(['multicast', 'unspecified']);

/** The table, most specific first: the first range holding an address gives its class. */
const specialRanges: readonly (readonly [string, AddressClass])[] = [
  ['169.254.169.254/32', 'metadata'], // AWS, GCP, Azure, OpenStack
  ['100.100.100.200/32', 'metadata'], // Alibaba Cloud
  ['fd00:ec2::254/128', 'metadata'], // AWS over IPv6
  ['fd00:ec2::23/128', 'metadata'], // AWS EKS Pod Identity Agent over IPv6
  ['fd20:ce::254/128', 'metadata'], // GCP over IPv6
  ['fd00:42::42/128', 'metadata'], // Scaleway over IPv6
  ['168.63.129.16/32', 'metadata'], // Azure WireServer (a public address every Azure VM reaches)
  ['0.0.0.0/8', 'unspecified'], // "this network": connect() to it reaches the host
  ['10.0.0.0/8', 'private'],
  ['100.64.0.0/10', 'cgnat'],
  ['127.0.0.0/8', 'loopback'],
  ['169.254.0.0/16', 'link-local'],
  ['172.16.0.0/12', 'private'],
  ['192.0.0.0/24', 'reserved'], // IETF protocol assignments
  ['192.0.2.0/24', 'reserved'], // documentation
  ['192.88.99.0/24', 'reserved'], // 6to4 relay anycast
  ['192.168.0.0/16', 'private'],
  ['198.18.0.0/15', 'reserved'], // benchmarking
  ['198.51.100.0/24', 'reserved'], // documentation
  ['203.0.113.0/24', 'reserved'], // documentation
  ['224.0.0.0/4', 'multicast'],
  ['240.0.0.0/4', 'reserved'], // includes 255.255.255.255
  ['::/128', 'unspecified'],
  ['::1/128', 'loopback'],
  ['::/96', 'reserved'], // IPv4-compatible, deprecated
  // The rest of the IETF-reserved block (mapped and translated forms are unwrapped first).
  ['::/8', 'reserved'],
  ['100::/64', 'reserved'], // discard
  // Local-use NAT64 (RFC 8215): where the IPv4 sits depends on the operator's prefix length
  // (RFC 6052 allows /48 to /96), so no one reading is safe; only a CIDR entry reaches it.
  ['64:ff9b:1::/48', 'reserved'],
  ['2001::/32', 'reserved'], // Teredo: the IPv4 inside is obfuscated
  ['2001:db8::/32', 'reserved'], // documentation
  ['fc00::/7', 'private'], // unique local
  ['fe80::/10', 'link-local'],
  ['fec0::/10', 'private'], // site-local, deprecated
  ['ff00::/8', 'multicast'],
];

const compiled: readonly (readonly [IpRange, AddressClass])[] = specialRanges.map(
  ([text, kind]) => [parseIpRange(text)!, kind] as const,
);

/** IPv6 ranges that carry an IPv4 address a gateway may forward to: [range, offset of the IPv4]. */
const embeddedRanges: readonly (readonly [IpRange, number])[] = [
  [parseIpRange('64:ff9b::/96')!, 12], // NAT64
  [parseIpRange('::ffff:0:0:0/96')!, 12], // IPv4-translated (SIIT, RFC 2765)
  [parseIpRange('2002::/16')!, 2], // 6to4
];

/**
 * The IPv4 address a gateway would forward `address` to (NAT64, IPv4-translated, 6to4), or
 * undefined. IPv4-mapped addresses are not here: `unmapIpv4` turns them into IPv4 first.
 */
export function embeddedIpv4(address: IpAddress): IpAddress | undefined {
  for (const [range, offset] of embeddedRanges) {
    if (inRange(address, range)) {
      return { family: 4, bytes: address.bytes.slice(offset, offset + 4) };
    }
  }
  return undefined;
}

/**
 * The class of `address`. IPv4-mapped, IPv4-translated, NAT64 and 6to4 IPv6 addresses take the
 * class of the IPv4 address inside (`::ffff:127.0.0.1` is loopback). `hostAddresses` are what
 * the host delivers to itself (its addresses, or ranges of its `local` routes): an address in
 * one is `host` unless the table already names it.
 */
export function classifyAddress(
  address: IpAddress,
  hostAddresses: readonly (IpAddress | IpRange)[] = [],
): AddressClass {
  const plain = unmapIpv4(address);
  const own = () => hostAddresses.some((host) => inRange(plain, asRange(host)));
  const inner = embeddedIpv4(plain);
  if (inner !== undefined) {
    // The IPv4 inside decides, unless the IPv6 form itself is the host's (a local route over
    // the NAT64 prefix, or the host's own 6to4 address).
    const kind = classifyAddress(inner, hostAddresses);
    return kind === 'public' && own() ? 'host' : kind;
  }
  for (const [range, kind] of compiled) if (inRange(plain, range)) return kind;
  return own() ? 'host' : 'public';
}

/**
 * Whether `range` lies wholly inside special-purpose space: inside one range of the table, or
 * inside one of the host's own addresses or `local` route ranges. Only such a CIDR entry lets
 * through the classes a name is refused (loopback, private, CGNAT, link-local, metadata, the
 * host's): `10.0.0.0/8` or `169.254.0.0/16` names them on purpose, while `0.0.0.0/1` (half of
 * every IPv4 address, meant as "the internet") would otherwise also name the host's loopback,
 * every private network and the cloud metadata address.
 */
export function isSpecialRange(
  range: IpRange,
  hostAddresses: readonly (IpAddress | IpRange)[] = [],
): boolean {
  const inside = (outer: IpRange) => outer.prefix <= range.prefix && inRange(range.address, outer);
  return (
    compiled.some(([outer]) => inside(outer)) || hostAddresses.some((host) => inside(asRange(host)))
  );
}

/** An address as the one-address range, a range as itself (IPv4-mapped forms unwrapped). */
function asRange(entry: IpAddress | IpRange): IpRange {
  if ('prefix' in entry) return entry;
  const address = unmapIpv4(entry);
  return { address, prefix: address.bytes.length * 8 };
}
