// Real servers for the egress tests, on loopback only: HTTP on a free port, HTTPS on port 443 of
// a random 127.x.y.z address (so CONNECT :443 is the real thing and no other test's server is
// hit), a self-signed certificate made with openssl, and a resolver the test controls.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer as createHttpServer, type RequestListener, type Server } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** A certificate for `names`, with its key (PEM). */
export interface TestCertificate {
  readonly cert: string;
  readonly key: string;
}

/** A self-signed certificate naming every host in `names` (subjectAltName). */
export function makeCertificate(names: readonly string[]): TestCertificate {
  const dir = mkdtempSync(join(tmpdir(), 'coda-egress-cert-'));
  try {
    const san = names.map((name) => `DNS:${name}`).join(',');
    execFileSync(
      'openssl',
      [
        'req',
        '-x509',
        '-newkey',
        'ec',
        '-pkeyopt',
        'ec_paramgen_curve:prime256v1',
        '-nodes',
        '-days',
        '2',
        '-subj',
        `/CN=${names[0]}`,
        '-addext',
        `subjectAltName=${san}`,
        '-keyout',
        join(dir, 'key.pem'),
        '-out',
        join(dir, 'cert.pem'),
      ],
      { stdio: 'ignore' },
    );
    return {
      cert: readFileSync(join(dir, 'cert.pem'), 'utf8'),
      key: readFileSync(join(dir, 'key.pem'), 'utf8'),
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** A started server and where it listens. */
export interface TestServer {
  readonly server: Server;
  readonly address: string;
  readonly port: number;
  /**
   * The bytes each closed connection carried, as the server's socket counted them, in the order
   * they closed: what a proxy's report of a plain HTTP exchange must match.
   */
  readonly closedConnections: readonly { read: number; written: number }[];
  /** Resolves with the next `count` connections to close after the first `since`. */
  connectionsClosed(since: number, count: number): Promise<{ read: number; written: number }[]>;
  close(): Promise<void>;
}

async function listen(server: Server, host: string, port: number): Promise<TestServer> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, resolve);
  });
  const info = server.address() as AddressInfo;
  const closedConnections: { read: number; written: number }[] = [];
  server.on('connection', (socket) =>
    socket.once('close', () =>
      closedConnections.push({ read: socket.bytesRead, written: socket.bytesWritten }),
    ),
  );
  return {
    server,
    address: info.address,
    port: info.port,
    closedConnections,
    connectionsClosed: async (since, count) => {
      for (let waited = 0; closedConnections.length < since + count && waited < 5_000; waited += 20)
        await new Promise((resolve) => setTimeout(resolve, 20));
      return closedConnections.slice(since, since + count);
    },
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** An HTTP server on `host` (default 127.0.0.1) and a free port. */
export function startHttp(
  handler: RequestListener,
  host = '127.0.0.1',
  port = 0,
): Promise<TestServer> {
  return listen(createHttpServer(handler), host, port);
}

/** A random loopback address other than 127.0.0.1. */
export function randomLoopback(): string {
  const byte = () => 1 + Math.floor(Math.random() * 250);
  return `127.${byte()}.${byte()}.${byte()}`;
}

/** An HTTPS server on port 443 of a random loopback address. */
export function startHttps(
  handler: RequestListener,
  certificate: TestCertificate,
): Promise<TestServer> {
  return listen(createHttpsServer({ ...certificate }, handler), randomLoopback(), 443);
}

/**
 * A resolver answering from `table` (name → addresses); a name it lacks fails as ENOTFOUND.
 * An array of arrays answers each call with the next entry (the last repeats): a rebinding DNS.
 */
export function tableLookup(table: Record<string, string | string[] | string[][]>) {
  const calls = new Map<string, number>();
  return async (hostname: string) => {
    const entry = table[hostname];
    if (entry === undefined)
      throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' });
    const count = calls.get(hostname) ?? 0;
    calls.set(hostname, count + 1);
    const answers: string[] =
      typeof entry === 'string'
        ? [entry]
        : Array.isArray(entry[0])
          ? ((entry as string[][])[Math.min(count, entry.length - 1)] ?? [])
          : (entry as string[]);
    return answers.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
  };
}
