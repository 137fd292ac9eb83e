// Attacks on the egress proxy's host side found by stop 33's attack round: an allowed server
// whose answer the proxy's HTTP server refuses to write (it ended the host process), bytes in
// HTTP heads (they passed maxEgressBytes uncounted), connections that never speak (one run held
// the host's descriptors until every run failed), and a report a run can inflate.
import { connect, createServer, type Server, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import {
  EgressProxy,
  handshakeTimeoutMs,
  maxClientConnections,
} from '../src/egress/egress-proxy.ts';
import { maxReportEntries, runSlots } from '../src/egress/egress-session.ts';

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** A raw TCP server answering each request with `answer` (then closing). */
async function rawServer(answer: string): Promise<{ port: number; requests: () => number }> {
  let requests = 0;
  const server: Server = createServer((socket) => {
    socket.on('error', () => {});
    socket.once('data', () => {
      requests += 1;
      socket.end(answer);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  cleanups.push(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return { port: (server.address() as { port: number }).port, requests: () => requests };
}

async function proxyFor(policy: {
  allow: string[];
  allowPrivate?: boolean;
  maxEgressBytes?: number;
}) {
  const proxy = new EgressProxy({
    lookup: async () => [{ address: '127.0.0.1', family: 4 }],
    tunnelRelay: 'node',
  });
  const listener = await proxy.openTcp(policy);
  cleanups.push(() => proxy.close());
  return { listener, port: (listener.address as { port: number }).port };
}

/** Sends `request` to the proxy and resolves with everything it answered once it closes. */
function exchange(port: number, request: string): Promise<string> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    let text = '';
    socket.on('data', (chunk: Buffer) => {
      text += chunk.toString('latin1');
    });
    socket.on('error', () => {});
    socket.on('close', () => resolve(text));
    socket.write(request);
  });
}

describe('an answer the proxy cannot pass on', () => {
  it.each([
    ['a status code below 100', 'HTTP/1.1 099 OK'],
    ['a DEL in the reason phrase', 'HTTP/1.1 200 O\x7fK'],
  ])(
    '%s is refused as the server’s protocol error; the host process lives on',
    async (_name, statusLine) => {
      const server = await rawServer(
        `${statusLine}\r\nContent-Length: 2\r\nConnection: close\r\n\r\nhi`,
      );
      const { listener, port } = await proxyFor({ allow: ['api.test'], allowPrivate: true });
      const answer = await exchange(
        port,
        `GET http://api.test:${server.port}/ HTTP/1.1\r\nHost: api.test:${server.port}\r\nConnection: close\r\n\r\n`,
      );
      expect(answer.split('\r\n')[0]).toBe('HTTP/1.1 502 Bad Gateway');
      expect(listener.session.report().denied.map(({ reason }) => reason)).toEqual(['protocol']);
      // Before the fix this process had already exited with the uncaught error.
      expect(process.exitCode ?? 0).toBe(0);
    },
  );
});

describe('HTTP heads count as bytes', () => {
  it('refuses requests once their headers alone passed maxEgressBytes', async () => {
    const server = await rawServer(
      'HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nhi',
    );
    const cap = 100_000;
    const { listener, port } = await proxyFor({
      allow: ['api.test'],
      allowPrivate: true,
      maxEgressBytes: cap,
    });
    const header = `X-Exfil: ${'a'.repeat(15_000)}\r\n`;
    for (let i = 0; i < 20; i += 1) {
      await exchange(
        port,
        `GET http://api.test:${server.port}/ HTTP/1.1\r\nHost: api.test:${server.port}\r\n${header}Connection: close\r\n\r\n`,
      );
    }
    const report = listener.session.report();
    // 15 000 header bytes per request: the seventh head would pass the cap, so it is never
    // sent, and no request after it is admitted (before: all 20 reached the server, counted as
    // 0 bytes).
    expect(server.requests()).toBe(6);
    expect(report.allowed[0]!.bytesSent).toBeLessThanOrEqual(cap);
    expect(report.allowed[0]!.bytesSent).toBeGreaterThan(6 * 15_000);
    expect(report.denied.filter(({ reason }) => reason === 'egress-limit').length).toBe(14);
  });
});

/** A server that reads and never answers: its open connections and the bytes it read. */
async function silentServer(): Promise<{ port: number; open: () => number; read: () => number }> {
  let open = 0;
  let read = 0;
  const server: Server = createServer((socket) => {
    open += 1;
    socket.on('error', () => {});
    socket.on('data', (chunk: Buffer) => {
      read += chunk.length;
    });
    socket.once('close', () => {
      open -= 1;
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  cleanups.push(() => {
    server.close();
  });
  return { port: (server.address() as { port: number }).port, open: () => open, read: () => read };
}

async function settle(done: () => boolean, ms = 5_000): Promise<void> {
  for (let waited = 0; !done() && waited < ms; waited += 20)
    await new Promise((resolve) => setTimeout(resolve, 20));
}

describe('upstream connections a run leaves behind (found by the review of these bounds)', () => {
  it('a client gone before the answer takes its upstream connection with it, and its head was counted', async () => {
    const server = await silentServer();
    const cap = 100_000;
    const { listener, port } = await proxyFor({
      allow: ['api.test'],
      allowPrivate: true,
      maxEgressBytes: cap,
    });
    const header = `X-Exfil: ${'a'.repeat(15_000)}\r\n`;
    for (let i = 0; i < 40; i += 1) {
      const socket = connect(port, '127.0.0.1');
      socket.on('error', () => {});
      socket.write(
        `GET http://api.test:${server.port}/ HTTP/1.1\r\nHost: api.test:${server.port}\r\n${header}\r\n`,
      );
      await new Promise((resolve) => setTimeout(resolve, 20));
      socket.destroy();
    }
    await settle(() => server.open() === 0);
    expect(server.open()).toBe(0); // before: 40 upstream connections stayed open
    expect(server.read()).toBeLessThanOrEqual(cap); // before: 603 000 bytes, counted as 0
    expect(listener.session.report().allowed[0]!.bytesSent).toBe(server.read());
  });

  it(`pipelined requests hold at most ${runSlots.upstream} upstream connections at once`, async () => {
    const server = await silentServer();
    const { listener, port } = await proxyFor({ allow: ['api.test'], allowPrivate: true });
    const request = `GET http://api.test:${server.port}/ HTTP/1.1\r\nHost: api.test:${server.port}\r\n\r\n`;
    const sockets = [0, 1].map(() => {
      const socket = connect(port, '127.0.0.1');
      socket.on('error', () => {});
      socket.write(request.repeat(200));
      return socket;
    });
    cleanups.push(() => {
      for (const socket of sockets) socket.destroy();
    });
    await settle(() => server.open() >= runSlots.upstream, 10_000);
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(server.open()).toBe(runSlots.upstream); // before: 400
    const limited = listener.session
      .report()
      .denied.filter(({ reason }) => reason === 'egress-limit');
    expect(limited.length).toBe(400 - runSlots.upstream);
    expect(limited[0]!.detail).toBe(
      `${runSlots.upstream} connections to servers open at once, the most a run may hold`,
    );
  });

  it.each([
    {
      kind: 'plain HTTP',
      request: 'GET http://api.test:PORT/ HTTP/1.1\r\nHost: api.test:PORT\r\n\r\n',
      lookupMs: 100,
      leaveAfterMs: 20,
    },
    {
      kind: 'tunnel',
      request: 'CONNECT api.test:PORT HTTP/1.1\r\nHost: api.test:PORT\r\n\r\n',
      lookupMs: 30,
      leaveAfterMs: 5,
    },
  ])(
    'a $kind client gone while its destination was looked up gets no upstream connection',
    async ({ request, lookupMs, leaveAfterMs }) => {
      const server = await silentServer();
      const proxy = new EgressProxy({
        lookup: () =>
          new Promise((resolve) =>
            setTimeout(() => resolve([{ address: '127.0.0.1', family: 4 }]), lookupMs),
          ),
        tunnelRelay: 'node',
      });
      cleanups.push(() => proxy.close());
      const listener = await proxy.openTcp({ allow: ['api.test'], allowPrivate: true });
      const proxyPort = (listener.address as { port: number }).port;
      for (let i = 0; i < 30; i += 1) {
        const socket = connect(proxyPort, '127.0.0.1');
        socket.on('error', () => {});
        socket.write(request.replaceAll('PORT', String(server.port)));
        await new Promise((resolve) => setTimeout(resolve, leaveAfterMs));
        socket.destroy();
      }
      await new Promise((resolve) => setTimeout(resolve, 500));
      await settle(() => server.open() === 0);
      expect(server.open()).toBe(0); // before: every one stayed open, holding a run slot
    },
  );
});

describe('the cap and its edges (found by a third look at these bounds)', () => {
  it('a chunked body’s framing counts before it goes: 1-byte chunks stay within the cap', async () => {
    const server = await silentServer();
    const cap = 20_000;
    const { port } = await proxyFor({
      allow: ['api.test'],
      allowPrivate: true,
      maxEgressBytes: cap,
    });
    const socket = connect(port, '127.0.0.1');
    socket.on('error', () => {});
    socket.write(
      `POST http://api.test:${server.port}/ HTTP/1.1\r\nHost: api.test:${server.port}\r\nTransfer-Encoding: chunked\r\n\r\n`,
    );
    for (let i = 0; i < 400 && !socket.destroyed; i += 1) {
      socket.write('1\r\nX\r\n'.repeat(100));
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    await new Promise((resolve) => setTimeout(resolve, 300));
    socket.destroy();
    expect(server.read()).toBeGreaterThan(cap / 2);
    expect(server.read()).toBeLessThanOrEqual(cap); // before: 119 674
  });

  it('a head refused for the cap leaves the run’s open tunnel to finish, and admits nothing new', async () => {
    const sink = await silentServer();
    const cap = 20_000;
    const { listener, port } = await proxyFor({
      allow: ['api.test'],
      allowPrivate: true,
      maxEgressBytes: cap,
    });
    const tunnel = connect(port, '127.0.0.1');
    tunnel.on('error', () => {});
    tunnel.resume();
    let closed = false;
    tunnel.on('close', () => {
      closed = true;
    });
    tunnel.write(`CONNECT api.test:${sink.port} HTTP/1.1\r\nHost: api.test:${sink.port}\r\n\r\n`);
    await new Promise((resolve) => setTimeout(resolve, 200));
    tunnel.write(Buffer.alloc(10_000, 0x41));
    await settle(() => sink.read() === 10_000);
    const answer = await exchange(
      port,
      `GET http://api.test:${sink.port}/ HTTP/1.1\r\nHost: api.test:${sink.port}\r\nX-Big: ${'b'.repeat(12_000)}\r\n\r\n`,
    );
    expect(answer).toContain('egress-limit');
    tunnel.write('hello');
    await settle(() => sink.read() === 10_005);
    expect(closed).toBe(false); // before: cut at its next byte
    expect(sink.read()).toBe(10_005);
    const again = await exchange(
      port,
      `GET http://api.test:${sink.port}/ HTTP/1.1\r\nHost: api.test:${sink.port}\r\n\r\n`,
    );
    expect(again).toContain('egress-limit');
    tunnel.destroy();
    expect(listener.session.report().allowed[0]!.bytesSent).toBeLessThanOrEqual(cap);
  });

  it('what relays hold of the cap is spent for everything else until they give it back', async () => {
    const sink = await silentServer();
    const answering = await rawServer(
      'HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok',
    );
    const cap = 1_600_000;
    const proxy = new EgressProxy({ lookup: async () => [{ address: '127.0.0.1', family: 4 }] });
    cleanups.push(() => proxy.close());
    const listener = await proxy.openTcp({
      allow: ['api.test'],
      allowPrivate: true,
      maxEgressBytes: cap,
    });
    const proxyPort = (listener.address as { port: number }).port;
    const tunnel = connect(proxyPort, '127.0.0.1');
    tunnel.on('error', () => {});
    cleanups.push(() => {
      tunnel.destroy();
    });
    tunnel.write(`CONNECT api.test:${sink.port} HTTP/1.1\r\nHost: api.test:${sink.port}\r\n\r\n`);
    await new Promise((resolve) => setTimeout(resolve, 200));
    // Not TLS: past 1 MiB the tunnel goes to the splice relay, which holds the rest of the cap.
    tunnel.write(Buffer.alloc(1_100_000, 0x41));
    await settle(() => sink.read() >= 1_100_000);
    const body = 'p'.repeat(480_000);
    const post = await exchange(
      proxyPort,
      `POST http://api.test:${sink.port}/ HTTP/1.1\r\nHost: api.test:${sink.port}\r\nContent-Length: ${body.length}\r\n\r\n${body}`,
    );
    expect(post).toContain("held by the run's bulk tunnels"); // before: sent, 480 kB over the cap
    tunnel.write(Buffer.alloc(100_000, 0x42)); // within what the relay holds
    await settle(() => sink.read() >= 1_200_000);
    expect(sink.read()).toBe(1_200_000);
    // The tunnel gone, what its relay still held comes back: a small request goes again.
    tunnel.destroy();
    await new Promise((resolve) => setTimeout(resolve, 500));
    const small = await exchange(
      proxyPort,
      `GET http://api.test:${answering.port}/ HTTP/1.1\r\nHost: api.test:${answering.port}\r\n\r\n`,
    );
    expect(small.split('\r\n')[0]).toBe('HTTP/1.1 200 OK');
  });

  it('bodiless POSTs count the Content-Length Node gives them, before they go', async () => {
    const server = await silentServer();
    const cap = 15_100;
    const { port } = await proxyFor({
      allow: ['api.test'],
      allowPrivate: true,
      maxEgressBytes: cap,
    });
    const sockets = Array.from({ length: 250 }, () => {
      const socket = connect(port, '127.0.0.1');
      socket.on('error', () => {});
      socket.write(
        `POST http://api.test:${server.port}/ HTTP/1.1\r\nHost: api.test:${server.port}\r\n\r\n`,
      );
      return socket;
    });
    cleanups.push(() => {
      for (const socket of sockets) socket.destroy();
    });
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    expect(server.read()).toBeGreaterThan(cap / 2);
    expect(server.read()).toBeLessThanOrEqual(cap); // before: 19 750
  });
});

describe('connections that never speak', () => {
  it(`holds at most ${maxClientConnections} per run and closes each silent one after ${handshakeTimeoutMs} ms`, async () => {
    const { listener, port } = await proxyFor({ allow: ['api.test'] });
    const sockets: Socket[] = [];
    const closed: number[] = [];
    const started = performance.now();
    for (let i = 0; i <= maxClientConnections; i += 1) {
      const socket = connect(port, '127.0.0.1');
      socket.on('error', () => {});
      socket.once('close', () => closed.push(performance.now() - started));
      sockets.push(socket);
      await new Promise((resolve) => socket.once('connect', resolve));
    }
    cleanups.push(() => {
      for (const socket of sockets) socket.destroy();
    });
    // The one past the bound is closed at once.
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(closed.length).toBe(1);
    expect(listener.session.report().denied).toEqual([
      {
        host: '(connection)',
        port: 0,
        reason: 'egress-limit',
        detail: `${maxClientConnections} proxy connections open at once, the most a run may hold`,
      },
    ]);
    // The rest, silent, are closed at the handshake timeout (generous bound for a loaded machine).
    await new Promise((resolve) => setTimeout(resolve, handshakeTimeoutMs + 3_000));
    expect(closed.length).toBe(maxClientConnections + 1);
    expect(Math.min(...closed.slice(1))).toBeGreaterThanOrEqual(handshakeTimeoutMs - 100);
    const silent = listener.session.report().denied.filter(({ reason }) => reason === 'protocol');
    expect(silent.length).toBe(maxClientConnections);
    expect(silent[0]!.detail).toBe(`no request within ${handshakeTimeoutMs} ms of connecting`);
  }, 30_000);
});

describe('the report a run can inflate', () => {
  it(`keeps ${maxReportEntries} refusals, each host and detail cut short`, async () => {
    const { listener, port } = await proxyFor({ allow: ['api.test'] });
    const long = `${'a'.repeat(60)}.`.repeat(110); // ~6.7 kB of labels
    for (let i = 0; i < maxReportEntries + 50; i += 1) {
      await exchange(port, `CONNECT x${i}.${long}test:443 HTTP/1.1\r\nHost: x\r\n\r\n`);
    }
    const { denied } = listener.session.report();
    expect(denied.length).toBe(maxReportEntries);
    expect(Math.max(...denied.map(({ host }) => host.length))).toBe(256);
    expect(Math.max(...denied.map(({ detail }) => detail.length))).toBeLessThanOrEqual(512);
  }, 60_000);

  it('keeps the first refusal of each reason past the bound, so a flood cannot hide another kind', async () => {
    const { listener, port } = await proxyFor({ allow: ['api.test'] });
    for (let i = 0; i < maxReportEntries + 10; i += 1) {
      await exchange(port, `CONNECT x${i}.junk.test:443 HTTP/1.1\r\nHost: x\r\n\r\n`);
    }
    await exchange(port, 'CONNECT 10.0.0.1:443 HTTP/1.1\r\nHost: x\r\n\r\n');
    const { denied } = listener.session.report();
    expect(denied.length).toBe(maxReportEntries + 1);
    expect(denied.at(-1)).toMatchObject({ host: '10.0.0.1', reason: 'ip-literal' });
  }, 60_000);

  it(`keeps ${maxReportEntries} allowed destinations and counts the rest together`, async () => {
    const server = await rawServer(
      'HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nhi',
    );
    const { listener, port } = await proxyFor({ allow: ['*.api.test'], allowPrivate: true });
    const extra = 5;
    for (let i = 0; i < maxReportEntries + extra; i += 1) {
      const host = `h${i}.api.test:${server.port}`;
      await exchange(
        port,
        `GET http://${host}/ HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`,
      );
    }
    const { allowed } = listener.session.report();
    expect(allowed.length).toBe(maxReportEntries + 1);
    expect(allowed.at(-1)).toMatchObject({
      host: '(other destinations)',
      port: 0,
      connections: extra,
    });
  }, 60_000);
});
