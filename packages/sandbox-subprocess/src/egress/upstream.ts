// Opening the connection to an admitted destination: to the checked address (never the name
// again, so a rebinding resolver cannot change it), with a bound on the wait.

import { connect, type Socket } from 'node:net';
import type { NetworkAllowedEntry } from '@coda/sandbox-core';
import { type Admitted, type EgressSession, type Refused, runSlots } from './egress-session.ts';

const connectTimeoutMs = 10_000;

/** An open upstream connection and the report entry its bytes go to. */
export interface Upstream {
  readonly socket: Socket;
  readonly entry: NetworkAllowedEntry;
}

/** Opens the upstream connection to an admitted destination (recorded as allowed once open). */
export function connectUpstream(
  session: EgressSession,
  admitted: Admitted,
): Promise<Upstream | Refused> {
  const { host, port } = admitted;
  if (!session.takeSlot('upstream')) {
    const detail = `${runSlots.upstream} connections to servers open at once, the most a run may hold`;
    return Promise.resolve(session.deny(host, port, 'egress-limit', detail));
  }
  return new Promise((resolve) => {
    const upstream = connect({
      host: admitted.address,
      port,
      family: admitted.family,
      timeout: connectTimeoutMs,
      // Writes go on as the client made them (egress-proxy.ts, accept, says why).
      noDelay: true,
    });
    upstream.once('close', () => session.releaseSlot('upstream'));
    const fail = (why: string): void => {
      upstream.destroy();
      resolve(session.deny(host, port, 'unreachable', `${admitted.address}:${port}: ${why}`));
    };
    upstream.once('connect', () => {
      upstream.setTimeout(0);
      upstream.removeAllListeners('error');
      upstream.on('error', () => {});
      session.track(upstream);
      resolve({ socket: upstream, entry: session.opened(admitted) });
    });
    upstream.once('timeout', () => fail('connection timed out'));
    upstream.once('error', (error) => fail(error.message));
  });
}
