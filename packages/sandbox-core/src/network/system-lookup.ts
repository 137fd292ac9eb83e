// The default resolver of every egress layer: the hosts file, then DNS through c-ares. Not
// getaddrinfo: Node runs it on libuv's thread pool, which lets at most two lookups run at once
// for the whole process and cannot cancel one, so a sandboxed program asking for names whose
// DNS server never answers held both threads and stalled every other lookup in the process
// (measured: the host's own `dns.lookup('localhost')` took 98 s). A c-ares query runs on the
// event loop, is bounded by its own timeout and is cancelled with the caller's signal.
import { Resolver } from 'node:dns/promises';
import { readFile } from 'node:fs/promises';
import { networkInterfaces } from 'node:os';
import { parseIpAddress } from './ip-address.ts';

/** The first DNS try of each family waits this long; c-ares gives the second try twice as long. */
const tryTimeoutMs = 2_000;

/**
 * Resolves `hostname` as the system would for most programs: its addresses in the hosts file
 * (`/etc/hosts`) if it is there, else its A and AAAA records from the servers of
 * `/etc/resolv.conf` (IPv6 first when the host has a global IPv6 address, as getaddrinfo orders
 * them; else IPv4 first). A server that never answers is given up after about 6 s (2 s, then
 * 4 s). The name is asked as given, without the resolver's search domains. Rejects when neither
 * family has an address, or when `signal` aborts (its queries are cancelled). Name services
 * other than files and DNS (mDNS, LDAP) are not asked.
 */
export async function systemLookup(
  hostname: string,
  signal?: AbortSignal,
): Promise<{ address: string; family: 4 | 6 }[]> {
  signal?.throwIfAborted();
  const listed = hostsFileAddresses(await readHostsFile(), hostname);
  if (listed.length > 0) return listed;
  signal?.throwIfAborted(); // aborted while the hosts file was read: no query goes out
  const resolver = new Resolver({ timeout: tryTimeoutMs, tries: 2 });
  const cancel = () => resolver.cancel();
  signal?.addEventListener('abort', cancel, { once: true });
  try {
    const [v4, v6] = await Promise.allSettled([
      resolver.resolve4(hostname),
      resolver.resolve6(hostname),
    ]);
    signal?.throwIfAborted();
    const ipv4 =
      v4.status === 'fulfilled' ? v4.value.map((address) => ({ address, family: 4 as const })) : [];
    const ipv6 =
      v6.status === 'fulfilled' ? v6.value.map((address) => ({ address, family: 6 as const })) : [];
    // A caller connects to the first address: the family the host can reach comes first.
    const found = prefersIpv6() ? [...ipv6, ...ipv4] : [...ipv4, ...ipv6];
    if (found.length > 0) return found;
    throw v4.status === 'rejected' ? v4.reason : new Error(`${hostname} has no address`);
  } finally {
    signal?.removeEventListener('abort', cancel);
  }
}

/**
 * Whether IPv6 goes first, as RFC 6724's default policy has getaddrinfo order it: when the host
 * has a global IPv6 address (2000::/3) to send from. Else IPv4 (also when the list cannot be read).
 */
function prefersIpv6(): boolean {
  try {
    return Object.values(networkInterfaces())
      .flat()
      .some((info) => info?.family === 'IPv6' && !info.internal && /^[23]/.test(info.address));
  } catch {
    return false;
  }
}

async function readHostsFile(): Promise<string> {
  try {
    return await readFile('/etc/hosts', 'latin1');
  } catch {
    return ''; // no hosts file: DNS alone
  }
}

/** The addresses `hostsFile` lists for `hostname` (case-insensitive), in file order. */
export function hostsFileAddresses(
  hostsFile: string,
  hostname: string,
): { address: string; family: 4 | 6 }[] {
  const wanted = hostname.toLowerCase().replace(/\.$/, '');
  return hostsFile.split('\n').flatMap((line) => {
    const [address, ...names] = (line.split('#')[0] ?? '').trim().split(/\s+/);
    if (address === undefined || !names.some((name) => name.toLowerCase() === wanted)) return [];
    const parsed = parseIpAddress(address);
    return parsed === undefined ? [] : [{ address, family: parsed.family }];
  });
}
