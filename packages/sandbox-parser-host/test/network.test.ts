// A parser's fetch goes through the same egress policy as a command's: the host passes its
// `network` allowlist to the subprocess layer, whose proxy lets the allowed host through and
// refuses another with a 403 naming the reason. Real bubblewrap, a real loopback server.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { SandboxValidationError } from '@coda/sandbox-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createParserHost } from '../src/index.ts';

const module = fileURLToPath(new URL('./fixtures/network-parsers.mjs', import.meta.url));
let server: Server;
let port: number;

beforeAll(async () => {
  server = createServer((_request, response) => response.end('feed body'));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  port = (server.address() as AddressInfo).port;
});
afterAll(() => {
  server?.closeAllConnections();
  server?.close();
});

describe('parser host with a network allowlist', () => {
  it("lets a parser's fetch reach an allowed host and refuses another", async () => {
    await using host = createParserHost({
      module,
      warmSpare: false,
      confinement: 'required',
      network: { allow: ['feeds.test'], allowPrivate: true },
      lookup: async (name) => (name.endsWith('.test') ? [{ address: '127.0.0.1', family: 4 }] : []),
    });
    const allowed = await host.runParser('fetchText', { url: `http://feeds.test:${port}/` });
    expect(allowed.data).toEqual({ status: 200, text: 'feed body' });
    const refused = await host.runParser('fetchText', { url: `http://other.test:${port}/` });
    // Node's fetch tunnels plain HTTP through CONNECT too, and reads the proxy's 403 as a
    // cancelled request: the reason is in the proxy's report, not in the parser's error.
    expect(refused.data).toEqual({ failed: '0', message: 'Request was cancelled.' });
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

  it("refuses a network allowlist with confinement 'none' (no namespace to hold it)", () => {
    expect(() =>
      createParserHost({ module, confinement: 'none', network: { allow: ['a.test'] } }),
    ).toThrow(SandboxValidationError);
  });
});
