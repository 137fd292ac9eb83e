// A TCP server on the host's loopback that counts connections: the exfiltration target.
import { createServer } from 'node:net';

/** A listening loopback server; `connections` counts every connection that reached it. */
export interface TrapServer {
  readonly port: number;
  readonly connections: number;
  close(): Promise<void>;
}

/** Starts a {@link TrapServer} on a free port of 127.0.0.1. */
export async function startTrapServer(): Promise<TrapServer> {
  let connections = 0;
  const server = createServer((socket) => {
    connections++;
    socket.destroy();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  return {
    port,
    get connections() {
      return connections;
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
