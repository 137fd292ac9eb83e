// The host-side splice relay of the egress proxy's tunnels, with a real helper process, real
// sockets and a raw TCP server the test starts: what it counts, how the byte cap cuts it, that
// closing leaves no process behind, and that a relay that dies ends its tunnel with a report.
import { describe, expect, it } from 'vitest';
import { createSandbox } from '../src/index.ts';
import { tableLookup } from './support/egress-servers.ts';
import { python } from './support/helpers.ts';
import {
  MiB,
  open,
  raw,
  relayProcesses,
  socksTunnel,
  tunnel,
  until,
  useRawServer,
} from './support/relay-tunnels.ts';

useRawServer();

describe('the host-side splice relay of tunnels', () => {
  it('carries a bulk download and counts it exactly; a short exchange stays in the proxy', async () => {
    const { proxy, listener, port } = await open();
    try {
      const size = 9 * MiB + 7;
      const download = await tunnel(port, size);
      await until(() => download.received() === size, 'the whole download');
      // The server holds the connection open: the tunnel's relay is up, beside the helper.
      expect(
        relayProcesses()
          .map((entry) => entry.name)
          .sort(),
      ).toEqual(['coda-egress-relay', 'coda-egress-relay: tunnel']);
      raw.accepted.at(-1)?.end();
      expect(await download.ended).toBe(size);
      await until(() => relayProcesses().length === 1, "the tunnel's relay to end");
      const short = await tunnel(port, 10);
      await until(() => short.received() === 10, 'the short answer');
      expect(relayProcesses().map((entry) => entry.name)).toEqual(['coda-egress-relay']);
      raw.accepted.at(-1)?.end();
      expect(await short.ended).toBe(10);
      await listener.close();
      expect(listener.session.report()).toEqual({
        allowed: [
          {
            host: 'raw.test',
            port: raw.port,
            bytes: size + 10 + download.request.length + short.request.length,
            bytesSent: download.request.length + short.request.length,
            bytesReceived: size + 10,
            connections: 2,
          },
        ],
        denied: [],
      });
    } finally {
      await proxy.close();
    }
  });

  it('carries a SOCKS5 tunnel the same way, counted exactly', async () => {
    const { proxy, listener, port } = await open();
    try {
      const size = 5 * MiB + 3;
      const download = await socksTunnel(port, size);
      await until(() => download.received() === size, 'the whole download');
      expect(
        relayProcesses()
          .map((entry) => entry.name)
          .sort(),
      ).toEqual(['coda-egress-relay', 'coda-egress-relay: tunnel']);
      raw.accepted.at(-1)?.end();
      expect(await download.ended).toBe(size);
      await listener.close();
      expect(listener.session.report().allowed).toEqual([
        {
          host: 'raw.test',
          port: raw.port,
          bytes: size + download.request.length,
          bytesSent: download.request.length,
          bytesReceived: size,
          connections: 1,
        },
      ]);
    } finally {
      await proxy.close();
    }
  });

  it('cuts a tunnel mid-stream at maxEgressBytes: one byte past the cap is counted, not passed on', async () => {
    const cap = 3 * MiB;
    const { proxy, listener, port } = await open({ maxEgressBytes: cap });
    try {
      const download = await tunnel(port, 20 * MiB);
      const received = await download.ended;
      await listener.close();
      const report = listener.session.report();
      expect(report.denied).toEqual([
        {
          host: 'raw.test',
          port: raw.port,
          reason: 'egress-limit',
          detail: `maxEgressBytes (${cap}) reached`,
        },
      ]);
      expect(report.allowed[0]?.bytes).toBe(cap + 1);
      expect(report.allowed[0]?.bytesSent).toBe(download.request.length);
      expect(received).toBe(cap - download.request.length);
    } finally {
      await proxy.close();
    }
  });

  it('with several tunnels at once the cap is met within 1 MiB per relay tunnel, either side', async () => {
    const cap = 6 * MiB;
    const tunnels = 4;
    const { proxy, listener, port } = await open({ maxEgressBytes: cap });
    try {
      const downloads = await Promise.all(
        Array.from({ length: tunnels }, () => tunnel(port, 8 * MiB)),
      );
      await Promise.all(downloads.map((download) => download.ended));
      await listener.close();
      const report = listener.session.report();
      expect(report.denied.map((entry) => entry.reason)).toEqual(['egress-limit']);
      // Each relay holds up to 1 MiB of the cap at a time: the others can pass the cap by what
      // it holds, or it can find the cap used up by what the others hold (and stop the run).
      expect(report.allowed[0]?.bytes).toBeGreaterThanOrEqual(cap - tunnels * MiB);
      expect(report.allowed[0]?.bytes).toBeLessThanOrEqual(cap + tunnels * MiB + 1);
    } finally {
      await proxy.close();
    }
  });

  it('closing the listener ends its tunnels; closing the proxy leaves no relay process', async () => {
    const { proxy, listener, port } = await open();
    const download = await tunnel(port, 4 * MiB);
    await until(() => download.received() === 4 * MiB, 'the download');
    expect(relayProcesses()).toHaveLength(2);
    await listener.close();
    expect(await download.ended).toBe(4 * MiB);
    expect(relayProcesses().map((entry) => entry.name)).toEqual(['coda-egress-relay']);
    expect(listener.session.report().allowed[0]?.bytesReceived).toBe(4 * MiB);
    const second = await proxy.openTcp({ allow: ['raw.test'], allowPrivate: true });
    const again = await tunnel((second.address as { port: number }).port, 4 * MiB);
    await until(() => again.received() === 4 * MiB, 'the second download');
    await proxy.close();
    expect(await again.ended).toBe(4 * MiB);
    expect(relayProcesses()).toEqual([]);
  });

  it("a tunnel's relay killed mid-stream ends that tunnel and is reported", async () => {
    const { proxy, listener, port } = await open();
    try {
      const download = await tunnel(port, 4 * MiB);
      await until(() => download.received() === 4 * MiB, 'the download');
      const child = relayProcesses().find((entry) => entry.name === 'coda-egress-relay: tunnel');
      expect(child).toBeDefined();
      process.kill(child?.pid ?? 0, 'SIGKILL');
      expect(await download.ended).toBe(4 * MiB);
      await listener.close();
      expect(listener.session.report().denied).toEqual([
        {
          host: 'raw.test',
          port: raw.port,
          reason: 'unreachable',
          detail: 'the egress relay of this tunnel ended by signal 9',
        },
      ]);
    } finally {
      await proxy.close();
    }
  });

  it('the helper killed mid-stream ends every tunnel it carries, each reported; the next tunnel gets a new helper', async () => {
    const { proxy, listener, port } = await open();
    try {
      const first = await tunnel(port, 2 * MiB);
      const second = await tunnel(port, 2 * MiB);
      await until(
        () => first.received() === 2 * MiB && second.received() === 2 * MiB,
        'both downloads',
      );
      const helper = relayProcesses().find((entry) => entry.name === 'coda-egress-relay');
      expect(relayProcesses()).toHaveLength(3);
      process.kill(helper?.pid ?? 0, 'SIGKILL');
      expect(await Promise.all([first.ended, second.ended])).toEqual([2 * MiB, 2 * MiB]);
      await until(() => relayProcesses().length === 0, 'the tunnels to die with the helper');
      await until(() => listener.session.report().denied.length === 2, 'both reports');
      const detail = `the egress relay (pid ${helper?.pid}) ended by SIGKILL`;
      expect(listener.session.report().denied).toEqual([
        { host: 'raw.test', port: raw.port, reason: 'unreachable', detail },
        { host: 'raw.test', port: raw.port, reason: 'unreachable', detail },
      ]);
      const third = await tunnel(port, 2 * MiB);
      await until(() => third.received() === 2 * MiB, 'a download after the helper died');
      raw.accepted.at(-1)?.end();
      expect(await third.ended).toBe(2 * MiB);
    } finally {
      await proxy.close();
    }
  });
});

describe('a sandboxed download through the forwarder and the relay', () => {
  it('a raw CONNECT client in the sandbox: the report counts exactly what it sent and received', async () => {
    const size = 6 * MiB + 11;
    const request = `${size}\n`;
    // CONNECT through the forwarder at 127.0.0.1:3128, ask the raw server for `size` bytes,
    // read them all, print how many arrived.
    const client = `
import socket
s = socket.create_connection(('127.0.0.1', 3128))
s.sendall(b'CONNECT raw.test:${raw.port} HTTP/1.1\\r\\nHost: raw.test:${raw.port}\\r\\n\\r\\n')
head = b''
while b'\\r\\n\\r\\n' not in head:
    head += s.recv(1)
s.sendall(${JSON.stringify(request)}.encode())
got = 0
while got < ${size}:
    data = s.recv(1 << 20)
    if not data:
        break
    got += len(data)
print(head.split(b' ')[1].decode(), got)
`;
    const sandbox = createSandbox(
      { network: { allow: ['raw.test'], allowPrivate: true }, timeoutMs: 60_000 },
      { lookup: tableLookup({ 'raw.test': ['127.0.0.1'] }) },
    );
    try {
      const result = await sandbox.run(python, ['-c', client]);
      expect(result.stderr).toBe('');
      expect(result.stdout).toBe(`200 ${size}\n`);
      expect(result.network).toEqual({
        allowed: [
          {
            host: 'raw.test',
            port: raw.port,
            bytes: request.length + size,
            bytesSent: request.length,
            bytesReceived: size,
            connections: 1,
          },
        ],
        denied: [],
      });
    } finally {
      await sandbox.close();
    }
  });
});
