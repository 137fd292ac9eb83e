// A TCP listener on the host's loopback that counts connections: the target a sandboxed command
// tries to reach. If the sandbox holds, the count stays at zero.
import { createServer } from 'node:net';

/** A listening port and how many connections reached it. */
export interface LoopbackListener {
  readonly port: number;
  readonly connections: number;
  close(): Promise<void>;
}

/** Listens on 127.0.0.1 on a free port. */
export async function listenOnLoopback(): Promise<LoopbackListener> {
  let connections = 0;
  const server = createServer((socket) => {
    connections++;
    socket.destroy();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  const port = typeof address === 'object' && address !== null ? address.port : 0;
  return {
    port,
    get connections() {
      return connections;
    },
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

/** Node code that connects to `port` on loopback and says what happened (exit 0 = connected). */
export function connectScript(port: number): string {
  return `require('net').connect(${port}, '127.0.0.1')
  .on('connect', () => { console.log('connected'); process.exit(0); })
  .on('error', (error) => { console.log(error.code); process.exit(3); });`;
}
