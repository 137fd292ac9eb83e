// The host-run egress proxy: one listener per run (a Unix socket bound into the run's sandbox,
// or a loopback TCP port), speaking HTTP (absolute-form requests and CONNECT) and SOCKS5 on the
// same socket. Every connection is admitted by the run's EgressSession; tunnels are inspected
// for a TLS ClientHello whose server name must be the host the tunnel was opened to.
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import {
  createServer as createHttpServer,
  request as httpRequest,
  type IncomingMessage,
  type ServerResponse,
} from 'node:http';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { NetworkAllowedEntry, NetworkPolicy } from '@coda/sandbox-core';
import { NetworkRules } from '@coda/sandbox-core';
import { maxClientHelloBytes, readClientHello } from './client-hello.ts';
import { type Admitted, EgressSession, type Refused } from './egress-session.ts';
import { type EgressLookup, systemLookup } from './lookup.ts';
import { handleSocks } from './socks5.ts';

/** Options of {@link EgressProxy}. */
export interface EgressProxyOptions {
  /** Resolves names on the host; default the system resolver. Tests pass one they control. */
  lookup?: EgressLookup | undefined;
}

/** One run's listener. */
export interface EgressListener {
  /** The run's checks, report and events. */
  readonly session: EgressSession;
  /** Where the listener is: a Unix socket path, or a loopback TCP port. */
  readonly address: { readonly path: string } | { readonly port: number };
  /** Stops listening and cuts the run's connections; resolves once the listener is closed. */
  close(): Promise<void>;
}

const connectTimeoutMs = 10_000;
/** How long a tunnel to a TLS port may wait for the client's first bytes. */
const firstBytesTimeoutMs = 10_000;
/** Ports whose tunnels must start with a TLS ClientHello. */
const tlsPorts: ReadonlySet<number> = new Set([443]);

/** The text a refused client reads (an HTTP body, or logged by the program). */
export function denialText(host: string, port: number, refused: Refused): string {
  return `coda-sandbox egress proxy refused ${host}:${port}: ${refused.reason} (${refused.detail})\n`;
}

/**
 * The proxy of one sandbox (or process): started on first use, one listener per run, closed by
 * {@link close}. Listeners are Unix sockets in a 0700 directory, or TCP on 127.0.0.1: never
 * reachable from another machine.
 */
export class EgressProxy {
  readonly #lookup: EgressLookup;
  #directory: string | undefined;
  #next = 0;
  readonly #listeners = new Set<EgressListener>();
  #closed = false;

  constructor(options: EgressProxyOptions = {}) {
    this.#lookup = options.lookup ?? systemLookup;
  }

  /**
   * Opens a listener on a Unix socket for one run under `policy`. Synchronous: the socket is
   * bound and listening when this returns.
   */
  openUnix(policy: NetworkPolicy | NetworkRules): EgressListener {
    if (this.#closed) throw new Error('The egress proxy is closed');
    // 0700 and root's (or the host user's): only bubblewrap, binding it into a run, gets through.
    this.#directory ??= mkdtempSync(join(tmpdir(), 'coda-egress-'));
    const path = join(this.#directory, `run-${++this.#next}.sock`);
    const listener = this.#open(policy, (server) => {
      server.listen(path);
      // The run's identity (nobody, when the host is root) must be able to connect; the 0700
      // directory keeps everyone else on the host out.
      chmodSync(path, 0o666);
      return { path };
    });
    return listener;
  }

  /** Opens a listener on 127.0.0.1 (a free port) for one run under `policy`. */
  async openTcp(policy: NetworkPolicy | NetworkRules): Promise<EgressListener> {
    if (this.#closed) throw new Error('The egress proxy is closed');
    let bound: { port: number } = { port: 0 };
    const listener = this.#open(policy, (server) => {
      server.listen(0, '127.0.0.1');
      return bound;
    });
    const server = this.#servers.get(listener)!;
    await new Promise<void>((resolve, reject) => {
      server.once('listening', resolve);
      server.once('error', reject);
    });
    const info = server.address();
    bound = { port: typeof info === 'object' && info !== null ? info.port : 0 };
    return { ...listener, address: bound };
  }

  readonly #servers = new Map<EgressListener, Server>();

  #open(
    policy: NetworkPolicy | NetworkRules,
    listen: (server: Server) => { path: string } | { port: number },
  ): EgressListener {
    const rules = policy instanceof NetworkRules ? policy : new NetworkRules(policy);
    const session = new EgressSession(rules, this.#lookup);
    const http = createHttpServer({ requestTimeout: 60_000, headersTimeout: 30_000 });
    http.on('request', (request, response) => void forwardHttp(session, request, response));
    http.on(
      'connect',
      (request, socket, head) => void tunnelHttp(session, request, socket as Socket, head),
    );
    http.on('clientError', (_error, socket) => {
      if (socket.writable) socket.end('HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n');
      else socket.destroy();
    });
    const server = createServer((socket) => {
      session.track(socket);
      socket.on('error', () => {});
      socket.once('data', (first) => {
        socket.pause();
        if (first[0] === 0x05) {
          void handleSocks(session, socket, first, (admitted, head, port) =>
            splice(session, admitted, socket, head, port),
          );
          return;
        }
        if (first[0] === 0x04) {
          session.deny('(socks4)', 0, 'protocol', 'SOCKS4 is not supported; use SOCKS5 with names');
          socket.destroy();
          return;
        }
        socket.unshift(first);
        http.emit('connection', socket);
        socket.resume();
      });
    });
    server.on('error', () => {});
    const address = listen(server);
    const listener: EgressListener = {
      session,
      address,
      close: async () => {
        this.#listeners.delete(listener);
        this.#servers.delete(listener);
        session.close();
        await new Promise<void>((resolve) => server.close(() => resolve()));
        if ('path' in address) rmSync(address.path, { force: true });
        // The directory goes with the last listener; the next run makes a new one.
        if (this.#listeners.size === 0 && this.#directory !== undefined && 'path' in address) {
          rmSync(this.#directory, { recursive: true, force: true });
          this.#directory = undefined;
        }
      },
    };
    this.#listeners.add(listener);
    this.#servers.set(listener, server);
    return listener;
  }

  /** Closes every listener and cuts every connection; safe to call twice. */
  async close(): Promise<void> {
    this.#closed = true;
    await Promise.all([...this.#listeners].map((listener) => listener.close()));
    if (this.#directory !== undefined) rmSync(this.#directory, { recursive: true, force: true });
    this.#directory = undefined;
  }
}

/** `host:port` of a CONNECT request (IPv6 in brackets), or undefined. */
function authority(text: string): { host: string; port: number } | undefined {
  const match = /^(\[[^\]]+\]|[^:[\]]+):(\d{1,5})$/.exec(text);
  if (match === null) return undefined;
  const host = (match[1] ?? '').replace(/^\[|\]$/g, '');
  return { host, port: Number(match[2]) };
}

/** An open upstream connection and the report entry its bytes go to. */
interface Upstream {
  readonly socket: Socket;
  readonly entry: NetworkAllowedEntry;
}

/** Opens the upstream connection to an admitted destination (recorded as allowed once open). */
function connectUpstream(session: EgressSession, admitted: Admitted): Promise<Upstream | Refused> {
  const { host, port } = admitted;
  return new Promise((resolve) => {
    const upstream = connect({
      host: admitted.address,
      port,
      family: admitted.family,
      timeout: connectTimeoutMs,
    });
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

/** CONNECT host:port: admit, answer 200, then {@link splice}. */
async function tunnelHttp(
  session: EgressSession,
  request: IncomingMessage,
  client: Socket,
  head: Buffer,
): Promise<void> {
  client.on('error', () => {});
  const target = authority(request.url ?? '');
  if (target === undefined) {
    const refused = session.deny(request.url ?? '', 0, 'protocol', 'CONNECT needs host:port');
    client.end(
      `HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n${denialText(request.url ?? '', 0, refused)}`,
    );
    return;
  }
  const admitted = await session.admit(target.host, target.port);
  if (!admitted.ok) {
    const body = denialText(target.host, target.port, admitted);
    client.end(
      `HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain\r\nX-Coda-Egress-Denied: ${admitted.reason}\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    );
    return;
  }
  client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
  await splice(session, admitted, client, head, target.port);
}

/**
 * Joins an admitted tunnel to its destination. The client's first bytes are read before any
 * reach the server: a TLS ClientHello must name the tunnel's host, and a TLS port (443) gets
 * nothing but TLS. On other ports the server may speak first.
 */
export async function splice(
  session: EgressSession,
  admitted: Admitted,
  client: Socket,
  head: Buffer,
  port: number,
): Promise<void> {
  const named = admitted.host;
  const mustBeTls = tlsPorts.has(port);
  let upstream: Socket | undefined;
  let entry: NetworkAllowedEntry | undefined;
  const open = async (): Promise<Socket | undefined> => {
    const result = await connectUpstream(session, admitted);
    if (!('socket' in result)) {
      client.destroy();
      return undefined;
    }
    const opened = result.socket;
    const counted = result.entry;
    entry = counted;
    // Server to client flows at once (a server may speak first); bytes are counted as received.
    opened.on('data', (chunk: Buffer) => {
      if (!session.count(counted, 0, chunk.length)) return;
      if (!client.write(chunk)) opened.pause();
    });
    client.on('drain', () => opened.resume());
    opened.once('end', () => client.end());
    opened.once('close', () => client.destroy());
    client.once('close', () => opened.destroy());
    return opened;
  };
  if (!mustBeTls) {
    upstream = await open();
    if (upstream === undefined) return;
  }
  const first = await firstBytes(client, head, mustBeTls);
  if (first === undefined) {
    if (mustBeTls)
      session.deny(
        named,
        port,
        'protocol',
        'no TLS ClientHello before the tunnel timed out or closed',
      );
    client.destroy();
    upstream?.destroy();
    return;
  }
  const hello = readClientHello(first);
  const refuse = (reason: 'sni-mismatch' | 'protocol', detail: string): void => {
    session.deny(named, port, reason, detail);
    client.destroy();
    upstream?.destroy();
  };
  if (hello.kind === 'client-hello') {
    const literal = named.includes(':') || /^\d+\.\d+\.\d+\.\d+$/.test(named);
    if (hello.serverName === undefined && !literal) {
      return refuse(
        'sni-mismatch',
        `the TLS ClientHello names no server; the tunnel is for ${named}`,
      );
    }
    if (hello.serverName !== undefined && hello.serverName !== named) {
      return refuse(
        'sni-mismatch',
        `the TLS ClientHello names ${hello.serverName}; the tunnel is for ${named}`,
      );
    }
  } else if (hello.kind === 'malformed' || mustBeTls) {
    return refuse(
      'protocol',
      mustBeTls ? `port ${port} carries TLS only` : 'a malformed TLS record',
    );
  }
  upstream ??= await open();
  if (upstream === undefined) return;
  const up = upstream;
  const counted = entry!;
  const send = (chunk: Buffer): void => {
    if (!session.count(counted, chunk.length, 0)) return;
    if (!up.write(chunk)) client.pause();
  };
  up.on('drain', () => client.resume());
  send(first);
  client.on('data', send);
  client.once('end', () => up.end());
  client.resume();
}

/**
 * The client's first bytes: enough to classify (a whole first TLS record, or anything that is
 * not TLS), or undefined when the client closes or a TLS port waits too long.
 */
function firstBytes(client: Socket, head: Buffer, mustBeTls: boolean): Promise<Buffer | undefined> {
  return new Promise((resolve) => {
    let data = head;
    const done = (value: Buffer | undefined): void => {
      clearTimeout(timer);
      client.off('data', onData);
      client.off('close', onClose);
      client.pause();
      resolve(value);
    };
    const decide = (): boolean => {
      const verdict = readClientHello(data);
      if (verdict.kind !== 'incomplete' || data.length >= maxClientHelloBytes) {
        done(data);
        return true;
      }
      return false;
    };
    const onData = (chunk: Buffer): void => {
      data = data.length === 0 ? chunk : Buffer.concat([data, chunk]);
      decide();
    };
    const onClose = (): void => done(undefined);
    const timer = setTimeout(
      () => done(undefined),
      mustBeTls ? firstBytesTimeoutMs : 2_147_483_647,
    );
    if (data.length > 0 && decide()) return;
    client.on('data', onData);
    client.once('close', onClose);
    client.resume();
  });
}

/** Headers that belong to one hop (RFC 9110 §7.6.1) and never go on. */
const hopHeaders = new Set([
  'connection',
  'proxy-connection',
  'keep-alive',
  'proxy-authorization',
  'proxy-authenticate',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
]);

function respondDenied(
  response: ServerResponse,
  host: string,
  port: number,
  refused: Refused,
  status = 403,
): void {
  const body = denialText(host, port, refused);
  response.writeHead(status, {
    'content-type': 'text/plain',
    'x-coda-egress-denied': refused.reason,
    'content-length': Buffer.byteLength(body),
    connection: 'close',
  });
  response.end(body);
}

/**
 * A plain HTTP request in absolute form (`GET http://host/path`). Each request on a kept-alive
 * connection is admitted on its own; the Host header must name the URL's host.
 */
async function forwardHttp(
  session: EgressSession,
  request: IncomingMessage,
  response: ServerResponse,
): Promise<void> {
  response.on('error', () => {});
  let url: URL;
  try {
    url = new URL(request.url ?? '');
  } catch {
    const refused = session.deny(
      request.headers.host ?? '',
      0,
      'protocol',
      'the proxy takes absolute-form requests (GET http://host/path) and CONNECT only',
    );
    return respondDenied(response, request.headers.host ?? '', 0, refused, 400);
  }
  if (url.protocol !== 'http:' || url.username !== '' || url.password !== '') {
    const refused = session.deny(
      url.hostname,
      0,
      'protocol',
      `${url.protocol} requests go through CONNECT; no credentials in the URL`,
    );
    return respondDenied(response, url.hostname, 0, refused, 400);
  }
  const host = url.hostname.replace(/^\[|\]$/g, '');
  const port = url.port === '' ? 80 : Number(url.port);
  const hostHeader = request.headers.host;
  if (hostHeader !== undefined) {
    const named = authority(
      hostHeader.includes(':') && !hostHeader.endsWith(']') ? hostHeader : `${hostHeader}:80`,
    );
    if (
      named === undefined ||
      named.host.toLowerCase() !== host.toLowerCase() ||
      named.port !== port
    ) {
      const refused = session.deny(
        host,
        port,
        'host-mismatch',
        `the Host header names ${JSON.stringify(hostHeader)}; the URL names ${host}:${port}`,
      );
      return respondDenied(response, host, port, refused);
    }
  }
  const admitted = await session.admit(host, port);
  if (!admitted.ok) return respondDenied(response, host, port, admitted);
  const opened = await connectUpstream(session, admitted);
  if (!('socket' in opened)) return respondDenied(response, host, port, opened, 502);
  const { socket: upstream, entry } = opened;
  const headers: Record<string, string | string[]> = {};
  const listed = new Set(
    String(request.headers.connection ?? '')
      .toLowerCase()
      .split(',')
      .map((name) => name.trim()),
  );
  for (const [name, value] of Object.entries(request.headers)) {
    if (value === undefined || hopHeaders.has(name) || listed.has(name)) continue;
    headers[name] = value;
  }
  headers.host = url.host;
  const outgoing = httpRequest({
    method: request.method,
    path: `${url.pathname}${url.search}`,
    headers,
    // With createConnection and no agent option, the request goes on this checked socket.
    createConnection: () => upstream,
  });
  outgoing.on('error', () => {
    if (!response.headersSent)
      respondDenied(
        response,
        host,
        port,
        session.deny(host, port, 'unreachable', 'the server closed the connection'),
        502,
      );
    else response.destroy();
  });
  request.on('data', (chunk: Buffer) => {
    if (!session.count(entry, chunk.length, 0)) outgoing.destroy();
  });
  request.pipe(outgoing);
  outgoing.on('response', (incoming) => {
    const forwarded: Record<string, string | string[]> = {};
    for (const [name, value] of Object.entries(incoming.headers)) {
      if (value !== undefined && !hopHeaders.has(name)) forwarded[name] = value;
    }
    response.writeHead(incoming.statusCode ?? 502, incoming.statusMessage, forwarded);
    incoming.on('data', (chunk: Buffer) => {
      if (!session.count(entry, 0, chunk.length)) incoming.destroy();
    });
    incoming.pipe(response);
    incoming.once('close', () => upstream.destroy());
  });
}
