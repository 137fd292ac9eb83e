// A Node parser under the Landlock backend (a simulated container whose seccomp profile refuses
// namespaces, so bubblewrap cannot run) with a network allowlist keeps the host's network
// stack: what keeps it to the egress proxy is the subprocess layer's Landlock port rule, seccomp
// (TCP client sockets only) and the connect supervisor. The parser ignores the proxy on purpose.
// Expected: EACCES (Landlock, or the supervisor for another address on the proxy's port), EPERM
// (seccomp: no UDP socket), no resolver reachable, nothing arriving at the host's servers, and
// an empty report (the proxy never saw these; docs/security.md says direct connections are not
// in it).
import { describe, expect, it } from 'vitest';
import { nodeIn } from '../../sandbox-subprocess/test/support/environments.ts';

const fixture = new URL('./fixtures/landlock-proxy-ignoring-host.ts', import.meta.url).pathname;

describe('a parser ignoring the proxy under the Landlock backend (held)', () => {
  it('direct TCP, another address on the proxy port, IPv6, UDP and DNS are refused; nothing arrives', async () => {
    const { result, accepted, datagrams } = JSON.parse(await nodeIn('moby-root', [fixture]));
    expect(result.confinement?.backend).toBe('landlock');
    expect(result.data).toEqual({
      direct: 'EACCES', // Landlock: no rule for the server's port
      elsewhereOnProxyPort: 'EACCES', // the supervisor: 127.0.0.1 only
      loopback6: 'EACCES',
      udp: 'EPERM', // seccomp: no datagram socket
      lookup: 'EAI_AGAIN', // getaddrinfo: no resolver reachable
      resolver: 'ECONNREFUSED', // c-ares: its UDP socket refused
    });
    expect(result.network).toEqual({ allowed: [], denied: [] });
    expect({ accepted, datagrams }).toEqual({ accepted: 0, datagrams: 0 });
  });
});
