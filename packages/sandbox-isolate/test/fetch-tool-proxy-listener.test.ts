// The isolate's fetch tool and the egress proxies' listeners (sandbox-core proxy-listeners.ts):
// a fetch tool allowed loopback (`allowPrivate`) must not reach a listener the process holds as
// an egress proxy's, however the URL or a redirect names 127.0.0.1. The listener here is a plain
// server on 127.0.0.1 held as the subprocess layer holds its runs' listeners; an allowed server
// redirects to it in each form. Expected: every call refused with `private-address`, the held
// server sees nothing; once released, the same URL is fetched (the refusal is the hold's).
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { holdProxyListenerPort } from '@coda/sandbox-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createFetchTool } from '../src/index.ts';

let held: Server;
let redirector: Server;
let heldPort: number;
let redirectorPort: number;
let reached = 0;
let release: () => void;

const listen = async (target: Server): Promise<number> => {
  await new Promise<void>((resolve) => target.listen(0, '127.0.0.1', resolve));
  return (target.address() as AddressInfo).port;
};

/**
 * How each URL names the held listener (the forms that reach a socket bound to 127.0.0.1), and
 * the host the refusal names: the URL parser's reading of it (WHATWG URL: hex and short IPv4
 * forms are 127.0.0.1, IPv6 is compressed).
 */
const forms = (port: number): [string, string, string][] => [
  ['literal', `http://127.0.0.1:${port}/`, '127.0.0.1'],
  ['mapped IPv6', `http://[::ffff:127.0.0.1]:${port}/`, '::ffff:7f00:1'],
  ['mapped IPv6, hex', `http://[::ffff:7f00:1]:${port}/`, '::ffff:7f00:1'],
  ['hex IPv4', `http://0x7f000001:${port}/`, '127.0.0.1'],
  ['short IPv4', `http://127.1:${port}/`, '127.0.0.1'],
  ['a name for 127.0.0.1', `http://loop.test:${port}/`, 'loop.test'],
  ['a name for ::1 and 127.0.0.1', `http://both.test:${port}/`, 'both.test'],
];

beforeAll(async () => {
  held = createServer((_request, response) => {
    reached++;
    response.end("a run's proxy\n");
  });
  heldPort = await listen(held);
  release = holdProxyListenerPort(heldPort);
  redirector = createServer((request, response) => {
    const index = Number((request.url ?? '/').slice(1));
    response.writeHead(302, { location: forms(heldPort)[index]![1] }).end();
  });
  redirectorPort = await listen(redirector);
});

afterAll(async () => {
  release();
  await new Promise((resolve) => held.close(resolve));
  await new Promise((resolve) => redirector.close(resolve));
});

const tool = () =>
  createFetchTool(
    // Loopback by name (allowPrivate) and by literal (a loopback CIDR).
    { allow: ['loop.test', 'both.test', 'redirect.test', '127.0.0.0/8'], allowPrivate: true },
    {
      lookup: async (name) =>
        name === 'both.test'
          ? [
              { address: '::1', family: 6 },
              { address: '127.0.0.1', family: 4 },
            ]
          : [{ address: '127.0.0.1', family: 4 }],
    },
  );

/** The tool's handler, called as the engine calls it; its answer's status or the refusal. */
const call = (url: string): Promise<string> => {
  const handler = tool().handler as (input: unknown, info: unknown) => Promise<unknown>;
  return handler(
    { url, method: 'GET', responseType: 'text' },
    { signal: new AbortController().signal },
  ).then(
    (response) => `fetched ${(response as { status: number }).status}`,
    (error: Error) => error.message.replace(/ \(.*$/, ''),
  );
};

describe("the fetch tool and a proxy listener's port (held)", () => {
  it('every form of 127.0.0.1 at a held port is refused, directly and by a redirect', async () => {
    const told: Record<string, [string, string]> = {};
    for (const [index, [name, url]] of forms(heldPort).entries()) {
      const redirect = `http://redirect.test:${redirectorPort}/${index}`;
      told[name] = [await call(url), await call(redirect)];
    }
    expect({ told, reached }).toEqual({
      told: Object.fromEntries(
        forms(heldPort).map(([name, , host]) => {
          const refused = `egress refused ${host}:${heldPort}: private-address`;
          return [name, [refused, refused]];
        }),
      ),
      reached: 0,
    });
  });

  it('released, the same port is fetched', async () => {
    release();
    expect(await call(`http://127.0.0.1:${heldPort}/`)).toBe('fetched 200');
    release = holdProxyListenerPort(heldPort);
    expect(reached).toBe(1);
  });
});
