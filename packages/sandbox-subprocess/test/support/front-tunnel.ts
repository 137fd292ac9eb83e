// A CONNECT tunnel to `api.test` through a fresh EgressProxy (bytes moved by Node), for the
// tests that put a TLS front behind the proxy and check what of a client's bytes reach it
// (attack-egress-hello-retry.test.ts, attack-egress-record-prefix.test.ts).
import { connect, type Socket } from 'node:net';
import type { NetworkReport } from '@coda/sandbox-core';
import { EgressProxy } from '../../src/egress/egress-proxy.ts';

/** Resolves once `done` holds (polling every 10 ms), or after `ms` either way. */
export async function waitFor(done: () => boolean, ms = 5_000): Promise<void> {
  for (let waited = 0; !done() && waited < ms; waited += 10)
    await new Promise((resolve) => setTimeout(resolve, 10));
}

/** A client connection to the proxy and what came back on it. */
export interface FrontConnection {
  readonly socket: Socket;
  /** Bytes that came back on the connection (since the tunnel was established, for a tunnel). */
  received(): Buffer;
  /** Resolves when the client socket closes. */
  readonly closed: Promise<void>;
  /** The run's report so far. */
  report(): NetworkReport;
}

/** An open tunnel: also what the proxy answered to CONNECT. */
export interface FrontTunnel extends FrontConnection {
  /** The proxy's answer to CONNECT (its head). */
  readonly established: string;
}

/**
 * Connects to a fresh proxy that resolves api.test to `frontAddress` (allowPrivate, Node
 * relay); `cleanups` gets the proxy's close.
 */
export async function openFrontConnection(
  frontAddress: string,
  cleanups: (() => Promise<void> | void)[],
): Promise<FrontConnection & { forget(): void }> {
  const proxy = new EgressProxy({
    lookup: async () => [{ address: frontAddress, family: 4 }],
    tunnelRelay: 'node',
  });
  cleanups.push(() => proxy.close());
  const listener = await proxy.openTcp({ allow: ['api.test'], allowPrivate: true });
  const socket = connect((listener.address as { port: number }).port, '127.0.0.1');
  socket.on('error', () => {});
  const closed = new Promise<void>((resolve) => socket.once('close', resolve));
  let received = Buffer.alloc(0);
  socket.on('data', (chunk: Buffer) => {
    received = Buffer.concat([received, chunk]);
  });
  return {
    socket,
    received: () => received,
    forget: () => {
      received = Buffer.alloc(0);
    },
    closed,
    report: () => listener.session.report(),
  };
}

/** Opens CONNECT api.test:`port` on {@link openFrontConnection}'s connection. */
export async function openFrontTunnel(
  frontAddress: string,
  port: number,
  cleanups: (() => Promise<void> | void)[],
): Promise<FrontTunnel> {
  const { forget, ...connection } = await openFrontConnection(frontAddress, cleanups);
  connection.socket.write(`CONNECT api.test:${port} HTTP/1.1\r\nHost: api.test:${port}\r\n\r\n`);
  await waitFor(() => connection.received().includes('\r\n\r\n'));
  const established = connection.received().toString('latin1');
  forget();
  return { ...connection, established };
}
