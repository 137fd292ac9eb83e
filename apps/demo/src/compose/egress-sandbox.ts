// A sandbox with a network allowlist and a small HTTP server on the host's loopback, reached by
// name: `api.demo.test` is allowed, `other.demo.test` (the same server) is not. A resolver of
// the demo's own maps both names to 127.0.0.1, so nothing leaves the machine.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createSandbox, type SubprocessSandbox } from '@coda/sandbox-subprocess';

/** The allowlist the demo shows. */
export const demoNetworkPolicy = Object.freeze({ allow: ['api.demo.test'], allowPrivate: true });

/** The demo's egress sandbox and server. */
export interface EgressDemo {
  readonly sandbox: SubprocessSandbox;
  /** `http://NAME:PORT/` for a host name. */
  url(host: string): string;
  close(): Promise<void>;
}

/** Starts the server and the sandbox. */
export async function startEgressDemo(): Promise<EgressDemo> {
  const server = createServer((_request, response) => response.end('hello from api.demo.test\n'));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const sandbox = createSandbox(
    {
      network: { allow: [...demoNetworkPolicy.allow], allowPrivate: true },
      allowFileWrites: false,
      timeoutMs: 10_000,
    },
    {
      lookup: async (name) =>
        name.endsWith('.demo.test') ? [{ address: '127.0.0.1', family: 4 }] : [],
    },
  );
  return {
    sandbox,
    url: (host) => `http://${host}:${port}/`,
    close: async () => {
      await sandbox.close();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
