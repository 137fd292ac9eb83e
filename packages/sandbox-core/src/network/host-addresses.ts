// What the host delivers to itself, for the `host` address class. Node's list of interfaces
// leaves out every interface that is not up and running, yet Linux still delivers connections
// to their addresses, and to whole ranges under a `local` route (AnyIP, cloud forwarding
// rules). So on Linux the kernel's own local routes are read, from /proc, and Node's list is
// added everywhere.
import { readFileSync } from 'node:fs';
import { networkInterfaces } from 'node:os';
import { type IpAddress, type IpRange, parseIpAddress } from './ip-address.ts';

/**
 * The addresses and ranges this host (its network namespace) delivers to itself: the kernel's
 * `local` routes for IPv4 and IPv6 and every IPv6 interface address (Linux), and the interface
 * addresses Node lists (everywhere). They change: a reading is reused for one second at most.
 */
export function hostLocalAddresses(): (IpAddress | IpRange)[] {
  const now = performance.now();
  if (cached === undefined || now - cached.at > cacheMs) cached = { at: now, value: readAll() };
  return cached.value;
}

/**
 * How long a reading is reused: reading /proc/net/fib_trie grows with the routing table (about
 * 90 ms at 20 000 routes), and an admission asks for it on every connection.
 */
const cacheMs = 1_000;
let cached: { at: number; value: (IpAddress | IpRange)[] } | undefined;

function readAll(): (IpAddress | IpRange)[] {
  return [
    ...localIpv4Routes(readProc('/proc/net/fib_trie')),
    ...localIpv6Routes(readProc('/proc/net/ipv6_route')),
    ...ipv6InterfaceAddresses(readProc('/proc/net/if_inet6')),
    ...Object.values(networkInterfaces())
      .flat()
      .flatMap((info) => {
        const parsed = info === undefined ? undefined : parseIpAddress(info.address);
        return parsed === undefined ? [] : [parsed];
      }),
  ];
}

function readProc(path: string): string {
  try {
    return readFileSync(path, 'latin1');
  } catch (error) {
    // Not Linux, or no /proc: Node's list is what there is. Any other failure (EMFILE) throws:
    // an incomplete list would class a host address as public.
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return '';
    throw error;
  }
}

/**
 * The `local` routes of `/proc/net/fib_trie`: each leaf line (`|-- 10.0.0.7`) is followed by
 * its routes (`/32 host LOCAL`); a LOCAL one makes the leaf and its prefix a local range.
 */
export function localIpv4Routes(fibTrie: string): IpRange[] {
  const ranges: IpRange[] = [];
  let leaf: IpAddress | undefined;
  for (const line of fibTrie.split('\n')) {
    const leafMatch = /^\s*\|-- (\S+)$/.exec(line);
    if (leafMatch !== null) {
      leaf = parseIpAddress(leafMatch[1] ?? '');
      continue;
    }
    const route = /^\s*\/(\d+) \S+ LOCAL(?: |$)/.exec(line);
    const prefix = Number(route?.[1]);
    // A local default route is a transparent proxy's (TPROXY: `local 0.0.0.0/0` in a table
    // only marked packets use), not every address being this host's.
    if (route !== null && leaf !== undefined && prefix > 0) ranges.push({ address: leaf, prefix });
  }
  return ranges;
}

const rtfLocal = 0x8000_0000;

/** The routes of `/proc/net/ipv6_route` whose flags carry RTF_LOCAL. */
export function localIpv6Routes(ipv6Route: string): IpRange[] {
  return ipv6Route.split('\n').flatMap((line) => {
    const [destination, prefix, , , , , , , flags] = line.trim().split(/\s+/);
    if (destination === undefined || flags === undefined) return [];
    if ((Number.parseInt(flags, 16) & rtfLocal) === 0) return [];
    const address = hexIpv6(destination);
    const length = Number.parseInt(prefix ?? '', 16);
    // As for IPv4: `local ::/0` is a transparent proxy's route, not the host's addresses.
    return address === undefined || !(length > 0) ? [] : [{ address, prefix: length }];
  });
}

/** Every address of `/proc/net/if_inet6` (the interface may be down: it is still the host's). */
export function ipv6InterfaceAddresses(ifInet6: string): IpAddress[] {
  return ifInet6.split('\n').flatMap((line) => {
    const address = hexIpv6(line.trim().split(/\s+/)[0] ?? '');
    return address === undefined ? [] : [address];
  });
}

/** 32 hex digits, as /proc prints an IPv6 address. */
function hexIpv6(text: string): IpAddress | undefined {
  if (!/^[0-9a-f]{32}$/.test(text)) return undefined;
  return { family: 6, bytes: text.match(/../g)!.map((pair) => Number.parseInt(pair, 16)) };
}
