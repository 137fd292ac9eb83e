// The loopback ports of this process's egress proxy listeners (the subprocess layer's TCP
// listeners: one per Landlock run). A destination reaching one is refused by every admission,
// whatever the policy: a run, a parser or an isolate's fetch tool allowed loopback
// (`allowPrivate`, or a loopback CIDR) could otherwise tunnel into another run's listener and be
// judged (and counted) by that run's policy (attack-egress-landlock-chain.test.ts). No caller
// needs to reach a proxy listener through another proxy.
import { type IpAddress, unmapIpv4 } from './ip-address.ts';

// One registry per process, not per copy of this module: an application can load two copies of
// @coda/sandbox-core (two versions installed side by side), and a listener recorded by the
// subprocess layer's copy must be refused by the admissions of the other's
// (attack-egress-landlock-two-cores.test.ts). Ports held, with how many holders each.
const registry = Symbol.for('@coda/sandbox-core/proxy-listener-ports');
const shared = globalThis as { [registry]?: Map<number, number> };
shared[registry] ??= new Map();
const held: Map<number, number> = shared[registry];

/** Records `port` (on 127.0.0.1) as an egress proxy listener's until the returned function runs. */
export function holdProxyListenerPort(port: number): () => void {
  held.set(port, (held.get(port) ?? 0) + 1);
  let released = false;
  return () => {
    if (released) return;
    released = true;
    const left = (held.get(port) ?? 1) - 1;
    if (left > 0) held.set(port, left);
    else held.delete(port);
  };
}

/** Whether connecting to `address`:`port` would reach one of this process's proxy listeners. */
export function isProxyListener(address: IpAddress, port: number): boolean {
  if (!held.has(port)) return false;
  const plain = unmapIpv4(address);
  // The listeners bind 127.0.0.1 only; no other address (::1, 127.0.0.2, the LAN's) reaches one.
  return plain.family === 4 && plain.bytes.join('.') === '127.0.0.1';
}
