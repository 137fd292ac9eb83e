// An admitted tunnel (CONNECT or SOCKS5) joined to its destination. The proxy reads the
// client's first bytes before any reach the server (the TLS ClientHello check); once the
// tunnel has passed, the bytes are moved by a host-side splice relay (host-relay.ts) when one
// can be started, else by Node, counted either way on the host.

import type { Socket } from 'node:net';
import type { NetworkAllowedEntry } from '@coda/sandbox-core';
import { type FirstBytes, maxClientHelloBytes, readClientHello } from './client-hello.ts';
import type { Admitted, EgressSession } from './egress-session.ts';
import { afterFirstHello } from './hello-retry.ts';
import type { HostRelay, HostRelays } from './host-relay.ts';
import { connectUpstream } from './upstream.ts';

/** How long a tunnel to a TLS port may wait for the client's first bytes. */
const firstBytesTimeoutMs = 10_000;
/** Ports whose tunnels must start with a TLS ClientHello. */
const tlsPorts: ReadonlySet<number> = new Set([443]);

/**
 * Bytes a tunnel moves through Node before it goes to the host-side relay: handing over costs
 * a few round trips between processes (~1 ms quiet, more under load), which a short exchange
 * would feel and a bulk transfer does not.
 */
const relayAfterBytes = 1 << 20;

/**
 * Bytes of `maxEgressBytes` a relay holds at a time (topped up when half is used): what the run
 * can pass the cap by, per relay tunnel, through its other connections.
 */
const grantBytes = 1 << 20;

/** Which side of a tunnel bytes came from, as the report counts them. */
type Direction = 'sent' | 'received';

/**
 * Moves `from` to `to` in Node, counting each chunk for `direction` first (a chunk that passes
 * the run's cap is not passed on), with backpressure, passing the end on; tells `moved` each
 * chunk's size after passing it on. Returns a function that stops it (and pauses `from`).
 */
function pipeCounted(
  session: EgressSession,
  entry: NetworkAllowedEntry,
  from: Socket,
  to: Socket,
  direction: Direction,
  moved?: (bytes: number) => void,
): () => void {
  const onData = (chunk: Buffer): void => {
    const counted =
      direction === 'sent'
        ? session.count(entry, chunk.length, 0)
        : session.count(entry, 0, chunk.length);
    if (!counted) return;
    if (!to.write(chunk)) from.pause();
    moved?.(chunk.length);
  };
  const onDrain = (): void => {
    from.resume();
  };
  const onEnd = (): void => {
    to.end();
  };
  from.on('data', onData);
  to.on('drain', onDrain);
  from.once('end', onEnd);
  from.resume();
  return () => {
    from.off('data', onData);
    to.off('drain', onDrain);
    from.off('end', onEnd);
    from.pause();
  };
}

/**
 * Joins an admitted tunnel to its destination. The client's first bytes are read before any
 * reach the server: a TLS ClientHello must name the tunnel's host, and a TLS port (443) gets
 * nothing but TLS. On other ports the server may speak first. `relays`: the host-side splice
 * relay, or undefined to move the bytes in Node.
 */
export async function joinTunnel(
  session: EgressSession,
  admitted: Admitted,
  client: Socket,
  head: Buffer,
  port: number,
  relays: HostRelays | undefined,
): Promise<void> {
  // Admission awaited a lookup: a client gone meanwhile gets no upstream connection.
  if (client.destroyed) return;
  // Admitted: the handshake's timeout (egress-proxy.ts) is over; a tunnel may idle.
  client.setTimeout(0);
  const named = admitted.host;
  const mustBeTls = tlsPorts.has(port);
  let upstream: Socket | undefined;
  let entry: NetworkAllowedEntry | undefined;
  let stopReceiving: (() => void) | undefined;
  const open = async (): Promise<Socket | undefined> => {
    const result = await connectUpstream(session, admitted);
    if (!('socket' in result)) {
      client.destroy();
      return undefined;
    }
    const opened = result.socket;
    entry = result.entry;
    // A client that left while the connection was made has no 'close' left to tell it.
    if (client.destroyed) {
      opened.destroy();
      return undefined;
    }
    // Server to client flows at once (a server may speak first).
    stopReceiving = pipeCounted(session, result.entry, opened, client, 'received');
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
  const helloRefused = helloRefusal(hello, named, session.rules.policy.allowEncryptedClientHello);
  if (helloRefused !== undefined) return refuse(helloRefused.reason, helloRefused.detail);
  if (hello.kind !== 'client-hello' && mustBeTls) {
    return refuse('protocol', `port ${port} carries TLS only`);
  }
  upstream ??= await open();
  if (upstream === undefined || entry === undefined) return;
  const up = upstream;
  const counted = entry;
  let moved = 0;
  if (hello.kind === 'client-hello') {
    // Only the hello's own record goes now; whatever the client sent after it in the same
    // write waits with the rest, until the server's answer says whether it asks again.
    const record = first.subarray(0, 5 + first.readUInt16BE(3));
    if (!session.count(counted, record.length, 0)) return;
    moved = record.length;
    // Watched from before the hello goes: the server's answer to it says whether it asks again.
    const after = afterFirstHello(client, up, first.subarray(record.length), firstBytesTimeoutMs);
    up.write(record);
    const next = await after;
    if (next === undefined) {
      // Both still there: the server did not answer in time (else one side closed).
      if (!client.destroyed && !up.destroyed) {
        const detail = `no answer to the TLS ClientHello within ${firstBytesTimeoutMs} ms`;
        session.deny(named, port, 'unreachable', detail);
      }
      client.destroy();
      up.destroy();
      return;
    }
    if (next.retried !== undefined) {
      const again = helloRefusal(
        next.retried,
        named,
        session.rules.policy.allowEncryptedClientHello,
      );
      if (again !== undefined) {
        return refuse(again.reason, `after the server's HelloRetryRequest, ${again.detail}`);
      }
      if (next.retried.kind !== 'client-hello') {
        return refuse('protocol', "no second ClientHello after the server's HelloRetryRequest");
      }
    }
    if (next.held.length > 0) {
      if (!session.count(counted, next.held.length, 0)) return;
      up.write(next.held);
      moved += next.held.length;
    }
  } else {
    if (!session.count(counted, first.length, 0)) return;
    moved = first.length;
    up.write(first);
  }
  if (relays === undefined) {
    pipeCounted(session, counted, client, up, 'sent');
    return;
  }
  // Node carries the tunnel's first bytes (a small request never waits for the relay), the
  // relay the bulk.
  stopReceiving?.();
  const stops: (() => void)[] = [];
  const onMoved = (bytes: number): void => {
    moved += bytes;
    if (moved < relayAfterBytes || stops.length === 0) return;
    for (const stop of stops.splice(0)) stop();
    void handOff(session, counted, client, up, relays);
  };
  stops.push(
    pipeCounted(session, counted, client, up, 'sent', onMoved),
    pipeCounted(session, counted, up, client, 'received', onMoved),
  );
}

/**
 * Why a tunnel's ClientHello is refused, if it is: it names another server than the tunnel's
 * host, or none (an IP tunnel aside), or hides it in an Encrypted Client Hello the policy does
 * not allow; or the bytes are malformed TLS. Bytes that are not TLS are no refusal here.
 */
function helloRefusal(
  hello: FirstBytes,
  named: string,
  allowEncrypted: boolean | undefined,
): { reason: 'sni-mismatch' | 'protocol'; detail: string } | undefined {
  if (hello.kind === 'malformed') return { reason: 'protocol', detail: 'a malformed TLS record' };
  if (hello.kind !== 'client-hello') return undefined;
  const literal = named.includes(':') || /^\d+\.\d+\.\d+\.\d+$/.test(named);
  if (hello.serverName === undefined && !literal) {
    return {
      reason: 'sni-mismatch',
      detail: `the TLS ClientHello names no server; the tunnel is for ${named}`,
    };
  }
  if (hello.serverName !== undefined && hello.serverName !== named) {
    return {
      reason: 'sni-mismatch',
      detail: `the TLS ClientHello names ${hello.serverName}; the tunnel is for ${named}`,
    };
  }
  if (hello.encrypted && allowEncrypted !== true) {
    return {
      reason: 'sni-mismatch',
      detail: `the TLS ClientHello carries Encrypted Client Hello, which hides the server it is for; the tunnel is for ${named} (network.allowEncryptedClientHello lets it through)`,
    };
  }
  return undefined;
}

/** Whether a socket still carries bytes both ways: neither ended nor closed. */
function flowing(socket: Socket): boolean {
  return !socket.destroyed && !socket.readableEnded && !socket.writableEnded;
}

/** Resolves once `socket` has nothing queued to write (or is gone). */
function flushed(socket: Socket): Promise<void> {
  if (socket.writableLength === 0 || !flowing(socket)) return Promise.resolve();
  // An empty write's callback runs once everything queued before it is written ('drain' only
  // comes after a write that returned false).
  return new Promise((resolve) => socket.write(Buffer.alloc(0), () => resolve()));
}

/** Passes on (counted) whatever Node has read from `from` and not delivered yet. */
function moveBuffered(
  session: EgressSession,
  entry: NetworkAllowedEntry,
  from: Socket,
  to: Socket,
  direction: Direction,
): void {
  for (let chunk = from.read() as Buffer | null; chunk !== null; chunk = from.read()) {
    const counted =
      direction === 'sent'
        ? session.count(entry, chunk.length, 0)
        : session.count(entry, 0, chunk.length);
    if (!counted) return;
    to.write(chunk);
  }
}

/**
 * Gives a tunnel that passed its checks to a host-side splice relay. Node may still hold bytes
 * of it (read and not delivered, or queued to write): they are passed on first, until neither
 * socket holds any, and the relay starts in that same tick, before Node reads again. A tunnel
 * that ends meanwhile, or a relay that cannot start, stays with Node.
 */
async function handOff(
  session: EgressSession,
  entry: NetworkAllowedEntry,
  client: Socket,
  upstream: Socket,
  relays: HostRelays,
): Promise<void> {
  const inNode = (): void => {
    if (client.destroyed || upstream.destroyed) return;
    pipeCounted(session, entry, client, upstream, 'sent');
    pipeCounted(session, entry, upstream, client, 'received');
    if (client.readableEnded) upstream.end();
    if (upstream.readableEnded) client.end();
  };
  for (;;) {
    await Promise.all([flushed(client), flushed(upstream)]);
    if (!flowing(client) || !flowing(upstream)) return inNode();
    moveBuffered(session, entry, client, upstream, 'sent');
    moveBuffered(session, entry, upstream, client, 'received');
    if (!flowing(client) || !flowing(upstream)) return inNode();
    if (client.writableLength === 0 && upstream.writableLength === 0) break;
  }
  // Under maxEgressBytes the relay holds part of the cap at a time, topped up as it counts.
  const granted = session.reserve(grantBytes);
  let held = granted?.bytes ?? 0;
  let final = granted?.final ?? true;
  let relay: HostRelay | undefined;
  const count = (sent: number, received: number): boolean => {
    if (granted !== undefined) {
      const used = Math.min(held, sent + received);
      held -= used;
      session.release(used);
    }
    if (!session.count(entry, sent, received)) return false;
    if (!final && held < grantBytes / 2) {
      const more = session.reserve(grantBytes - held);
      if (more !== undefined) {
        held += more.bytes;
        final = more.final;
        relay?.grant(more.bytes, more.final);
      }
    }
    return true;
  };
  // Each relay tunnel is a process on the host: a run has a bounded number at once.
  if (!session.takeSlot('relay')) {
    session.release(held);
    return inNode();
  }
  relay = relays.handOff(client, upstream, granted, {
    count,
    overBudget: () => session.reachedCap(entry),
    failed: (detail) => session.deny(entry.host, entry.port, 'unreachable', detail),
  });
  if (relay === undefined) {
    session.releaseSlot('relay');
    session.release(held);
    return inNode();
  }
  relay.once('close', () => {
    session.releaseSlot('relay');
    session.release(held);
    held = 0;
  });
  session.track(relay);
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
    if (client.destroyed) return done(undefined); // gone before 'close' could be listened for
    if (data.length > 0 && decide()) return;
    client.on('data', onData);
    client.once('close', onClose);
    client.resume();
  });
}
