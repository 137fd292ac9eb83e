// The loopback ports of this process's egress proxy listeners (the subprocess layer's TCP
// listeners: one per Landlock run). A destination reaching one is refused by every admission,
// whatever the policy: a run, a parser or an isolate's fetch tool allowed loopback
// (`allowPrivate`, or a loopback CIDR) could otherwise tunnel into another run's listener and be
// judged (and counted) by that run's policy (attack-egress-landlock-chain.test.ts). No caller
// needs to reach a proxy listener through another proxy.
import { type IpAddress, unmapIpv4 } from './ip-address.ts';

const held = new Set<number>();

/** Records `port` (on 127.0.0.1) as an egress proxy listener's until the returned function runs. */
export function holdProxyListenerPort(port: number): () => void {
  held.add(port);
  return () => held.delete(port);
}

/** Whether connecting to `address`:`port` would reach one of this process's proxy listeners. */
export function isProxyListener(address: IpAddress, port: number): boolean {
  if (!held.has(port)) return false;
  const plain = unmapIpv4(address);
  // The listeners bind 127.0.0.1 only; no other address (::1, 127.0.0.2, the LAN's) reaches one.
  return plain.family === 4 && plain.bytes.join('.') === '127.0.0.1';
}
