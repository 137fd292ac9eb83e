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
import { createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { NetworkPolicy } from '@coda/sandbox-core';
import { holdProxyListenerPort, NetworkRules } from '@coda/sandbox-core';
import { perlPath } from '../linux/detect.ts';
import { EgressSession, type Refused } from './egress-session.ts';
import { type ForwarderChannel, HostRelays } from './host-relay.ts';
import { type EgressLookup, systemLookup } from './lookup.ts';
import { handleSocks } from './socks5.ts';
import { relaySyscalls } from './splice-relay.ts';
import { joinTunnel } from './tunnel.ts';
import { connectUpstream } from './upstream.ts';

/** Options of {@link EgressProxy}. */
export interface EgressProxyOptions {
  /** Resolves names on the host; default the system resolver. Tests pass one they control. */
  lookup?: EgressLookup | undefined;
  /**
   * Who moves a tunnel's bytes once it passed its checks: `splice`, a host-side perl relay per
   * tunnel moving them with splice(2) (Linux with perl; elsewhere `node`), or `node`, the
   * proxy's own event loop. Default `splice`. Counting and the byte cap stay on the host either
   * way.
   */
  tunnelRelay?: 'splice' | 'node' | undefined;
  /**
   * Whether a run's forwarder passes each client connection to the host (`true`, the default
   * where the splice relay runs: the host reads the client's own socket, one relay for a
   * tunnel's bulk) or relays it over a Unix connection of its own (`false`: two relays). Counts,
   * checks and the byte cap are the same either way.
   */
  passConnections?: boolean | undefined;
}

/** Options of {@link EgressProxy.openUnix}. */
export interface UnixListenerOptions {
  /**
   * The run's forwarder (forwarder.ts) connects to this socket: its first connection is the
   * forwarder's channel, answered 'P' (passed to the relay helper, which receives the client
   * sockets over it) or 'R' (relay each connection), and never read as a proxy request.
   */
  forwarded?: boolean | undefined;
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

/** Client connections one run's listener keeps open at once; more are refused (`egress-limit`). */
export const maxClientConnections = 256;
/** How long a client connection may take to start its request (or finish a SOCKS5 handshake). */
export const handshakeTimeoutMs = 10_000;

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
  /** The host-side splice relay of tunnels, or undefined to move tunnel bytes in Node. */
  readonly #relays: HostRelays | undefined;
  readonly #passConnections: boolean;
  #directory: string | undefined;
  #next = 0;
  readonly #listeners = new Set<EgressListener>();
  #closed = false;

  constructor(options: EgressProxyOptions = {}) {
    this.#lookup = options.lookup ?? systemLookup;
    this.#relays =
      options.tunnelRelay !== 'node' && process.platform === 'linux' && perlPath !== undefined
        ? new HostRelays(perlPath)
        : undefined;
    this.#passConnections = options.passConnections ?? true;
  }

  /**
   * Opens a listener on a Unix socket for one run under `policy`. Synchronous: the socket is
   * bound and listening when this returns.
   */
  openUnix(
    policy: NetworkPolicy | NetworkRules,
    options: UnixListenerOptions = {},
  ): EgressListener {
    if (this.#closed) throw new Error('The egress proxy is closed');
    // 0700 and root's (or the host user's): only bubblewrap, binding it into a run, gets through.
    this.#directory ??= mkdtempSync(join(tmpdir(), 'coda-egress-'));
    const path = join(this.#directory, `run-${++this.#next}.sock`);
    const listener = this.#open(
      policy,
      (server) => {
        server.listen(path);
        // The run's identity (nobody, when the host is root) must be able to connect; the 0700
        // directory keeps everyone else on the host out.
        chmodSync(path, 0o666);
        return { path };
      },
      options.forwarded === true,
    );
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
    // No admission reaches it: no run's proxy (nor fetch tool) is a way into this one.
    server.once('close', holdProxyListenerPort(bound.port));
    return { ...listener, address: bound };
  }

  readonly #servers = new Map<EgressListener, Server>();

  #open(
    policy: NetworkPolicy | NetworkRules,
    listen: (server: Server) => { path: string } | { port: number },
    forwarded = false,
  ): EgressListener {
    const rules = policy instanceof NetworkRules ? policy : new NetworkRules(policy);
    const session = new EgressSession(rules, this.#lookup);
    const relays = this.#relays;
    // Started with the first listener, not the first tunnel: spawn() blocks the event loop.
    relays?.start();
    const http = createHttpServer({ requestTimeout: 60_000, headersTimeout: 30_000 });
    // A handler that throws must cost its own connection only: an uncaught error here would end
    // the host process and every run with it.
    http.on('request', (request, response) => {
      forwardHttp(session, request, response).catch(() => response.destroy());
    });
    http.on('connect', (request, socket, head) => {
      tunnelHttp(session, request, socket as Socket, head, relays).catch(() => socket.destroy());
    });
    http.on('clientError', (_error, socket) => {
      if (socket.writable) socket.end('HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n');
      else socket.destroy();
    });
    let clients = 0;
    const accept = (socket: Socket): void => {
      session.track(socket);
      socket.on('error', () => {});
      // A relay must not hold back what a client wrote: with Nagle's algorithm on its side, a
      // small write behind one the server has not acknowledged waits for the server's delayed
      // ACK (40 ms), at each such exchange (the second flight of a TLS handshake among them).
      // The client chose its own timing; the proxy passes each write on as it comes. (No effect
      // on a Unix socket.)
      socket.setNoDelay(true);
      // Each client connection holds a descriptor (and often an upstream one) on the host: a
      // run holds a bounded number at once, and one that says nothing is closed.
      if (clients >= maxClientConnections) {
        session.deny(
          '(connection)',
          0,
          'egress-limit',
          `${maxClientConnections} proxy connections open at once, the most a run may hold`,
        );
        socket.destroy();
        return;
      }
      clients += 1;
      socket.once('close', () => {
        clients -= 1;
      });
      socket.setTimeout(handshakeTimeoutMs, () => {
        session.deny(
          '(connection)',
          0,
          'protocol',
          `no request within ${handshakeTimeoutMs} ms of connecting`,
        );
        socket.destroy();
      });
      socket.once('data', (first) => {
        socket.pause();
        if (first[0] === 0x05) {
          // The SOCKS5 handshake stays under the timeout until its tunnel is joined.
          handleSocks(session, socket, first, (admitted, head, port) =>
            joinTunnel(session, admitted, socket, head, port, relays),
          ).catch(() => socket.destroy());
          return;
        }
        // HTTP: Node's headersTimeout and keepAliveTimeout bound a silent connection from here.
        socket.setTimeout(0);
        if (first[0] === 0x04) {
          session.deny('(socks4)', 0, 'protocol', 'SOCKS4 is not supported; use SOCKS5 with names');
          socket.destroy();
          return;
        }
        socket.unshift(first);
        http.emit('connection', socket);
        socket.resume();
      });
    };
    // The forwarder's channel is the listener's first connection, opened before the command
    // runs; no later connection is taken as one (forwarder.ts says why that matters).
    // The forwarder opens one only where it has the numbers to pass with (forwarder.ts).
    let channelAwaited = forwarded && relaySyscalls.sendmsg !== 0 && relaySyscalls.prctl !== 0;
    let channel: ForwarderChannel | undefined;
    const takeChannel = (socket: Socket): void => {
      socket.on('error', () => {});
      channel = this.#passConnections
        ? relays?.takeChannel(socket, {
            adopted: (client) => (closed ? client.destroy() : accept(client)),
            refused: (detail) =>
              session.deny('(forwarder)', 0, 'protocol', `a passed connection: ${detail}`),
          })
        : undefined;
      if (channel === undefined) socket.end('R');
    };
    let closed = false;
    const server = createServer((socket) => {
      if (!channelAwaited) return accept(socket);
      channelAwaited = false;
      takeChannel(socket);
    });
    server.on('error', () => {});
    const address = listen(server);
    const listener: EgressListener = {
      session,
      address,
      close: async () => {
        closed = true;
        channel?.close();
        this.#listeners.delete(listener);
        this.#servers.delete(listener);
        const cut = session.close();
        await new Promise<void>((resolve) => server.close(() => resolve()));
        await cut;
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
    await this.#relays?.close();
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

/** CONNECT host:port: admit, answer 200, then {@link joinTunnel}. */
async function tunnelHttp(
  session: EgressSession,
  request: IncomingMessage,
  client: Socket,
  head: Buffer,
  relays: HostRelays | undefined,
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
  await joinTunnel(session, admitted, client, head, target.port, relays);
}

/** Methods Node sends without a Content-Length when they have no body. */
const bodilessMethods: ReadonlySet<string> = new Set([
  'GET',
  'HEAD',
  'DELETE',
  'OPTIONS',
  'TRACE',
  'CONNECT',
]);

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
  // Listened for from the start: a client may leave while its destination is looked up or
  // connected to, and an upstream connection opened after that must not stay.
  let clientGone = false;
  response.once('close', () => {
    clientGone = !response.writableFinished;
  });
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
  // The body's framing is the proxy's to set, whatever the Connection header lists: without it,
  // a GET, HEAD, DELETE or OPTIONS request writes its body upstream raw, where it reads as a
  // second request (with any Host) on the checked connection. Node has decoded a chunked body
  // and checked a Content-Length (both at once is refused before this).
  const length = request.headers['content-length'];
  if (length !== undefined) headers['content-length'] = length;
  if (request.headers['transfer-encoding'] !== undefined) headers['transfer-encoding'] = 'chunked';
  // Without either, the request has no body; Node would add `Content-Length: 0` for a method
  // that may carry one: said here, so the head counted is the head sent.
  if (
    length === undefined &&
    headers['transfer-encoding'] === undefined &&
    !bodilessMethods.has(request.method ?? '')
  ) {
    headers['content-length'] = '0';
  }
  // Each request has its own upstream connection; saying so here (Node would add it) keeps the
  // head counted below the head that is sent.
  headers.connection = 'close';
  const path = `${url.pathname}${url.search}`;
  // The upstream connection carries this one request: its bytes, heads and framing included,
  // are what the report counts. Received bytes are counted as they arrive. Sent: the request
  // line and the headers given to Node, checked against the cap before any connection (a head
  // past it never goes), body chunks before they go, and what Node adds around them (a few
  // headers, chunk framing) as soon as the answer starts and when the connection closes.
  // A chunked body ends with a last chunk (`0` and two CRLFs): counted with the head.
  const head =
    headBytes(`${request.method} ${path} HTTP/1.1`, headers) +
    (headers['transfer-encoding'] === undefined ? 0 : 5);
  const admitted = await session.admit(host, port);
  if (!admitted.ok) return respondDenied(response, host, port, admitted);
  if (!session.fits(head)) {
    const refused = session.refuseOverCap(host, port, head);
    return respondDenied(response, host, port, refused);
  }
  if (clientGone) return;
  const opened = await connectUpstream(session, admitted);
  if (!('socket' in opened)) return respondDenied(response, host, port, opened, 502);
  const { socket: upstream, entry } = opened;
  if (clientGone) {
    upstream.destroy();
    return;
  }
  if (!session.count(entry, head, 0)) return;
  let sentCounted = head;
  const countWritten = (): void => {
    const unseen = upstream.bytesWritten - sentCounted;
    if (unseen <= 0) return;
    sentCounted += unseen;
    session.count(entry, unseen, 0);
  };
  upstream.on('data', (chunk: Buffer) => {
    if (!session.count(entry, 0, chunk.length)) upstream.destroy();
  });
  upstream.once('close', countWritten);
  // A client gone before the answer ended needs no upstream connection: it would stay open for
  // as long as the server takes.
  response.once('close', () => {
    if (clientGone) upstream.destroy();
  });
  const outgoing = httpRequest({
    method: request.method,
    path,
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
  const chunked = headers['transfer-encoding'] !== undefined;
  request.on('data', (chunk: Buffer) => {
    // Chunked, Node writes each chunk with its size line and CRLFs: counted with it, before.
    const bytes = chunked ? chunk.length + chunk.length.toString(16).length + 4 : chunk.length;
    sentCounted += bytes;
    if (!session.count(entry, bytes, 0)) outgoing.destroy();
  });
  request.pipe(outgoing);
  outgoing.on('response', (incoming) => {
    const forwarded: Record<string, string | string[]> = {};
    for (const [name, value] of Object.entries(incoming.headers)) {
      if (value !== undefined && !hopHeaders.has(name)) forwarded[name] = value;
    }
    countWritten();
    try {
      response.writeHead(incoming.statusCode ?? 502, incoming.statusMessage, forwarded);
    } catch (error) {
      // Node's client takes status lines its server side refuses to write (`099`, a DEL in
      // the reason): refused as the server's protocol error, never thrown.
      upstream.destroy();
      const refused = session.deny(
        host,
        port,
        'protocol',
        `the server's answer cannot be passed on: ${(error as Error).message}`,
      );
      // The refused writeHead left its reason on the response; the denial's own must replace it.
      response.statusMessage = '';
      try {
        respondDenied(response, host, port, refused, 502);
      } catch {
        response.destroy();
      }
      return;
    }
    incoming.pipe(response);
    incoming.once('close', () => upstream.destroy());
  });
}

/** The size of an HTTP head as given to Node: its first line, each header line, the blank line. */
function headBytes(firstLine: string, headers: Record<string, string | string[]>): number {
  let bytes = Buffer.byteLength(firstLine) + 4;
  for (const [name, value] of Object.entries(headers)) {
    for (const one of [value].flat()) bytes += Buffer.byteLength(`${name}: ${one}`) + 2;
  }
  return bytes;
}
