// A parser's fetch goes through the same egress policy as a command's: the host passes its
// `network` allowlist to the subprocess layer, whose proxy lets the allowed host through and
// refuses another with a 403 naming the reason, and the proxy's report for the call's child is
// on the result, ok or failed. Real bubblewrap, a real loopback server whose own byte counts
// are what the report must say.
import { createServer, type Server } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { fileURLToPath } from 'node:url';
import { SandboxValidationError } from '@coda/sandbox-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createParserHost, type ParserHostOptions } from '../src/index.ts';
import { testPython } from './python-helpers.ts';

const module = fileURLToPath(new URL('./fixtures/network-parsers.mjs', import.meta.url));
const pythonNetworkPath = fileURLToPath(new URL('./fixtures/python/network.py', import.meta.url));
let server: Server;
let port: number;
/** What the server read and wrote on each connection: the proxy's byte counts, seen from the far end. */
const sockets: Socket[] = [];

beforeAll(async () => {
  server = createServer((_request, response) => response.end('feed body'));
  server.on('connection', (socket) => sockets.push(socket));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  port = (server.address() as AddressInfo).port;
});
afterAll(() => {
  server?.closeAllConnections();
  server?.close();
});

const options: ParserHostOptions = {
  module,
  warmSpare: false,
  confinement: 'required',
  network: { allow: ['feeds.test'], allowPrivate: true },
  lookup: async (name: string) =>
    name.endsWith('.test') ? [{ address: '127.0.0.1', family: 4 }] : [],
};

/** The allowed entry the proxy must report for the server's one new connection. */
function allowedEntry(connection: Socket) {
  return {
    host: 'feeds.test',
    port,
    bytes: connection.bytesRead + connection.bytesWritten,
    bytesSent: connection.bytesRead,
    bytesReceived: connection.bytesWritten,
    connections: 1,
  };
}

const deniedOther = () => ({
  host: 'other.test',
  port,
  reason: 'not-allowed',
  detail: `other.test:${port} matches no allow entry`,
});

describe('parser host with a network allowlist', () => {
  it("lets a parser's fetch reach an allowed host and refuses another, both on the result", async () => {
    await using host = createParserHost(options);
    const before = sockets.length;
    const allowed = await host.runParser('fetchText', { url: `http://feeds.test:${port}/` });
    expect(allowed.data).toEqual({ status: 200, text: 'feed body' });
    expect(sockets.length).toBe(before + 1);
    expect(allowed.network).toEqual({ allowed: [allowedEntry(sockets.at(-1)!)], denied: [] });
    const refused = await host.runParser('fetchText', { url: `http://other.test:${port}/` });
    // Node's fetch tunnels plain HTTP through CONNECT too, and reads the proxy's 403 as a
    // cancelled request: the reason is in the proxy's report, on the result.
    expect(refused.data).toEqual({ failed: '0', message: 'Request was cancelled.' });
    expect(refused.network).toEqual({ allowed: [], denied: [deniedOther()] });
    expect(sockets.length).toBe(before + 1);
  });

  it('a failed call carries its network report too', async () => {
    await using host = createParserHost(options);
    const before = sockets.length;
    const result = await host.runParser('fetchThenThrow', { url: `http://feeds.test:${port}/` });
    expect(result).toMatchObject({ ok: false, code: 'RUNTIME', error: 'parsed nothing useful' });
    expect(sockets.length).toBe(before + 1);
    expect(result.network).toEqual({ allowed: [allowedEntry(sockets.at(-1)!)], denied: [] });
  });

  it('a Python parser has no network even with an allowlist: the runner refuses the socket module', async () => {
    await using host = createParserHost({
      ...options,
      module: pythonNetworkPath,
      python: testPython,
    });
    const before = sockets.length;
    const result = await host.runParser('fetch_text', { url: `http://feeds.test:${port}/` });
    expect(result).toMatchObject({
      ok: false,
      code: 'RUNTIME',
      error: 'audit hook: import of socket is not available to parsers',
    });
    expect(result.network).toEqual({ allowed: [], denied: [] });
    expect(sockets.length).toBe(before);
  });

  it('a Python parser that rebuilds _socket past the import hook still reaches nothing (held)', async () => {
    // _imp.create_builtin raises no import event (docs/parser-host.md lists it); the audit
    // hook's allowlist still refuses every event a socket raises on its way out.
    await using host = createParserHost({
      ...options,
      module: pythonNetworkPath,
      python: testPython,
    });
    const before = sockets.length;
    const result = await host.runParser('rebuilt_socket', { port });
    const refused = (event: string) =>
      `RefusedToParsers: audit hook: ${event} is not available to parsers`;
    expect(result.data).toEqual({
      tcp: refused('socket.__new__'),
      udp: refused('socket.__new__'),
      getaddrinfo: refused('socket.getaddrinfo'),
      gethostbyname: refused('socket.gethostbyname'),
      'pair-connect': refused('socket.connect'),
      'pair-sendto': refused('socket.sendto'),
    });
    expect(result.network).toEqual({ allowed: [], denied: [] });
    expect(sockets.length).toBe(before);
  });

  it('without an allowlist a result has no network report', async () => {
    await using host = createParserHost({ module, warmSpare: false, confinement: 'required' });
    const result = await host.runParser('fetchText', { url: `http://127.0.0.1:${port}/` });
    expect(result.network).toBeUndefined();
  });

  it('without an allowlist a parser has no network at all', async () => {
    await using host = createParserHost({ module, warmSpare: false, confinement: 'required' });
    const result = await host.runParser('fetchText', { url: `http://127.0.0.1:${port}/` });
    // The subprocess layer's seccomp filter refuses the inet socket itself.
    expect(result.data).toEqual({
      failed: 'EPERM',
      message: `connect EPERM 127.0.0.1:${port} - Local (undefined:undefined)`,
    });
  });

  it("refuses a network allowlist with confinement 'none' (nothing would hold it)", () => {
    const create = () =>
      createParserHost({ module, confinement: 'none', network: { allow: ['a.test'] } });
    expect(create).toThrow(SandboxValidationError);
    expect(create).toThrow(
      "Invalid parser host options: confinement: a network allowlist needs confinement 'auto' or 'required' (the egress proxy is the only way out of a confined child; an unconfined one would ignore it) (got \"none\")",
    );
  });
});
