// createFetchTool on real isolates against real loopback servers reached by name through a
// resolver the test controls: allowed hosts answer, other hosts, private addresses and redirects
// to them are refused with the reason, and the byte cap and timeout hold.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { NetworkEvent } from '@coda/sandbox-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createFetchTool, SandboxEngine } from '../src/index.ts';
import { expectError, expectResult } from './helpers.ts';

let server: Server;
let secure: Server;
let port: number;
let cert: string;
const events: NetworkEvent[] = [];
/** What the endless redirect body's server side saw: bytes written, when the socket closed. */
const redirectBody = { written: 0, closedAt: 0 };

function selfSigned(name: string): { cert: string; key: string } {
  const dir = mkdtempSync(join(tmpdir(), 'coda-fetch-cert-'));
  try {
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
        `/CN=${name}`,
        '-addext',
        `subjectAltName=DNS:${name}`,
        '-keyout',
        join(dir, 'k.pem'),
        '-out',
        join(dir, 'c.pem'),
      ],
      { stdio: 'ignore' },
    );
    return {
      cert: readFileSync(join(dir, 'c.pem'), 'utf8'),
      key: readFileSync(join(dir, 'k.pem'), 'utf8'),
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const listen = async (target: Server): Promise<number> => {
  await new Promise<void>((resolve) => target.listen(0, '127.0.0.1', resolve));
  return (target.address() as AddressInfo).port;
};

let engine: SandboxEngine;
let securePort: number;

beforeAll(async () => {
  server = createServer((request, response) => {
    const url = request.url ?? '/';
    if (url === '/json')
      return void response.setHeader('content-type', 'application/json').end('{"items":[1,2,3]}');
    if (url === '/to-metadata')
      return void response
        .writeHead(302, { location: 'http://metadata.test/latest/meta-data/' })
        .end();
    if (url === '/to-literal')
      return void response.writeHead(301, { location: `http://127.0.0.1:${port}/` }).end();
    if (url === '/to-other')
      return void response.writeHead(307, { location: `http://api.test:${port}/json` }).end();
    if (url === '/big') return void response.end(Buffer.alloc(200_000, 0x61));
    if (url === '/headers') return void response.end(JSON.stringify(request.headers));
    if (url === '/to-b-headers')
      return void response.writeHead(307, { location: `http://b.test:${port}/headers` }).end();
    if (url === '/to-json-endless') {
      // A redirect whose body never ends: how much of it is read, and how long it stays open.
      response.writeHead(302, { location: '/json' });
      const chunk = Buffer.alloc(65_536, 0x62);
      const pump = () => {
        while (!response.destroyed && response.write(chunk)) redirectBody.written += chunk.length;
        if (!response.destroyed) response.once('drain', pump);
      };
      response.once('close', () => {
        redirectBody.closedAt = performance.now();
      });
      return pump();
    }
    if (url === '/stall') return; // never answers
    if (url === '/loop') return void response.writeHead(302, { location: '/loop' }).end();
    if (url === '/to-file')
      return void response.writeHead(302, { location: 'file:///etc/passwd' }).end();
    if (url === '/echo') {
      const chunks: Buffer[] = [];
      request.on('data', (chunk: Buffer) => chunks.push(chunk));
      request.on('end', () =>
        response.end(
          JSON.stringify({
            method: request.method,
            type: request.headers['content-type'],
            body: Buffer.concat(chunks).toString(),
          }),
        ),
      );
      return;
    }
    response.end('hello');
  });
  port = await listen(server);
  const pair = selfSigned('secure.test');
  cert = pair.cert;
  secure = createHttpsServer(pair, (_request, response) => response.end('over tls'));
  securePort = await listen(secure);
  const table: Record<string, string> = {
    'api.test': '127.0.0.1',
    'secure.test': '127.0.0.1',
    'other.test': '127.0.0.1',
    'metadata.test': '169.254.169.254',
  };
  engine = new SandboxEngine({
    isolation: 'in-process',
    tools: {
      fetch: createFetchTool(
        { allow: ['api.test', 'secure.test', 'metadata.test'], allowPrivate: true },
        {
          maxResponseBytes: 100_000,
          timeoutMs: 1_500,
          ca: cert,
          lookup: async (hostname) =>
            table[hostname] === undefined ? [] : [{ address: table[hostname], family: 4 }],
          onEvent: (event) => events.push(event),
        },
      ),
    },
  });
});

afterAll(async () => {
  await engine?.dispose();
  server?.closeAllConnections();
  server?.close();
  secure?.close();
});

const run = (code: string) => engine.run({ code });

describe('createFetchTool', () => {
  it('is a named tool in toolDeclarations()', () => {
    expect(engine.toolDeclarations()).toContain('fetch(');
  });

  it('fetches an allowed host: status, headers, text or JSON', async () => {
    const text = expectResult(
      await run(
        `const r = await tools.fetch({ url: 'http://api.test:${port}/' }); return [r.status, r.body, r.url];`,
      ),
    );
    expect(text.payload).toEqual([200, 'hello', `http://api.test:${port}/`]);
    const json = expectResult(
      await run(
        `const r = await tools.fetch({ url: 'http://api.test:${port}/json', responseType: 'json' }); return [r.body, r.headers['content-type']];`,
      ),
    );
    expect(json.payload).toEqual([{ items: [1, 2, 3] }, 'application/json']);
    const tls = expectResult(
      await run(`return (await tools.fetch({ url: 'https://secure.test:${securePort}/' })).body`),
    );
    expect(tls.payload).toBe('over tls');
  });

  it('sends a JSON request body', async () => {
    const echo = expectResult(
      await run(
        `return (await tools.fetch({ url: 'http://api.test:${port}/echo', method: 'POST', body: { a: 1 }, responseType: 'json' })).body`,
      ),
    );
    expect(echo.payload).toEqual({ method: 'POST', type: 'application/json', body: '{"a":1}' });
  });

  it('refuses another host and an IP literal, naming the reason', async () => {
    const other = expectError(
      await run(`return await tools.fetch({ url: 'http://other.test:${port}/' })`),
      'RUNTIME',
    );
    expect(other.message).toContain(
      `egress refused other.test:${port}: not-allowed (other.test:${port} matches no allow entry)`,
    );
    const literal = expectError(
      await run(`return await tools.fetch({ url: 'http://127.0.0.1:${port}/' })`),
      'RUNTIME',
    );
    expect(literal.message).toContain(`egress refused 127.0.0.1:${port}: ip-literal`);
  });

  it('checks every redirect hop: to the metadata address and to an IP literal are refused, to an allowed host followed', async () => {
    const metadata = expectError(
      await run(`return await tools.fetch({ url: 'http://api.test:${port}/to-metadata' })`),
      'RUNTIME',
    );
    expect(metadata.message).toContain(
      'egress refused metadata.test:80: private-address (resolved to 169.254.169.254 (metadata))',
    );
    const literal = expectError(
      await run(`return await tools.fetch({ url: 'http://api.test:${port}/to-literal' })`),
      'RUNTIME',
    );
    expect(literal.message).toContain(`egress refused 127.0.0.1:${port}: ip-literal`);
    const followed = expectResult(
      await run(
        `const r = await tools.fetch({ url: 'http://api.test:${port}/to-other', responseType: 'json' }); return [r.url, r.body];`,
      ),
    );
    expect(followed.payload).toEqual([`http://api.test:${port}/json`, { items: [1, 2, 3] }]);
  });

  it('refuses a body over maxResponseBytes and ends a stalled request at timeoutMs', async () => {
    const big = expectError(
      await run(`return await tools.fetch({ url: 'http://api.test:${port}/big' })`),
      'RUNTIME',
    );
    expect(big.message).toContain('the response is larger than maxResponseBytes (100000)');
    const started = performance.now();
    const stalled = expectError(
      await run(`return await tools.fetch({ url: 'http://api.test:${port}/stall' })`),
      'RUNTIME',
    );
    expect(stalled.message).toContain('timed out or was cancelled');
    expect(performance.now() - started).toBeLessThan(10_000);
  });

  it('reports each allowed and refused connection', () => {
    expect(
      events
        .filter((event) => event.type === 'denied')
        .map((event) => `${event.host} ${event.type === 'denied' ? event.reason : ''}`),
    ).toEqual([
      'other.test not-allowed',
      '127.0.0.1 ip-literal',
      'metadata.test private-address',
      '127.0.0.1 ip-literal',
      'api.test unreachable', // the stalled request, at timeoutMs
    ]);
    expect(events.some((event) => event.type === 'allowed' && event.host === 'api.test')).toBe(
      true,
    );
  });

  it('validates its options, naming each bad field', () => {
    expect(() => createFetchTool({ allow: ['*'] })).toThrow('allow.0');
    expect(() =>
      createFetchTool({ allow: ['a.test'] }, { maxResponseBytes: 0, timeoutMs: -1 } as never),
    ).toThrow(/maxResponseBytes.*timeoutMs/);
  });
});

describe('createFetchTool: bounds of an execution', () => {
  const lookup = async (hostname: string) =>
    hostname === 'api.test' ? [{ address: '127.0.0.1', family: 4 }] : [];
  /** Runs `use` with an engine whose one tool is `createFetchTool(policy, options)`. */
  const withFetch = async (
    policy: Parameters<typeof createFetchTool>[0],
    options: Parameters<typeof createFetchTool>[1],
    use: (engine: SandboxEngine) => Promise<void>,
  ): Promise<void> => {
    const engine = new SandboxEngine({
      isolation: 'in-process',
      tools: { fetch: createFetchTool(policy, options) },
    });
    try {
      await use(engine);
    } finally {
      await engine.dispose();
    }
  };

  it("reads nothing of a redirect's body: its connection closes as the next hop starts", async () => {
    // A long timeoutMs: draining the body (as before) kept reading until it, gigabytes later.
    await withFetch(
      { allow: ['api.test'], allowPrivate: true },
      { timeoutMs: 60_000, lookup },
      async (patient) => {
        const started = performance.now();
        const result = expectResult(
          await patient.run({
            code: `const r = await tools.fetch({ url: 'http://api.test:${port}/to-json-endless', responseType: 'json' });
            await new Promise((resolve) => setTimeout(resolve, 2000));
            return r.body;`,
          }),
        );
        const ended = performance.now();
        expect(result.payload).toEqual({ items: [1, 2, 3] });
        expect(redirectBody.closedAt).toBeGreaterThan(started);
        // Closed while the code still waited its 2 s (before: open until timeoutMs).
        expect(redirectBody.closedAt).toBeLessThan(ended - 1_000);
        expect(redirectBody.written).toBeLessThan(64 * 1_048_576); // socket buffers, not gigabytes
      },
    );
  });

  it('holds maxEgressBytes per execution: the call that passes it and every later one are refused', async () => {
    const code = `const outcomes = [];
      for (let i = 0; i < 4; i += 1) {
        try { outcomes.push((await tools.fetch({ url: 'http://api.test:${port}/big' })).body.length); }
        catch (error) { outcomes.push(error.message); }
      }
      return outcomes;`;
    const refused = `egress refused api.test:${port}: egress-limit (maxEgressBytes (450000) reached)`;
    await withFetch(
      { allow: ['api.test'], allowPrivate: true, maxEgressBytes: 450_000 },
      { maxResponseBytes: 1_000_000, lookup },
      async (capped) => {
        // 200 000 bytes a body: two fit in 450 000, the third passes the cap mid-body, the fourth
        // is refused before it connects. A new execution starts from zero.
        for (let execution = 0; execution < 2; execution += 1) {
          const outcomes = expectResult(await capped.run({ code })).payload as unknown[];
          expect(
            outcomes.map((entry) =>
              typeof entry === 'string' ? entry.slice(entry.indexOf('egress refused')) : entry,
            ),
          ).toEqual([200_000, 200_000, refused, refused]);
        }
      },
    );
  });

  it('counts a request body against maxEgressBytes before it is sent', async () => {
    await withFetch(
      { allow: ['api.test'], allowPrivate: true, maxEgressBytes: 1_000 },
      { lookup },
      async (capped) => {
        const error = expectError(
          await capped.run({
            code: `return await tools.fetch({ url: 'http://api.test:${port}/echo', method: 'POST', body: 'x'.repeat(1_001) })`,
          }),
          'RUNTIME',
        );
        expect(error.message).toContain(
          `egress refused api.test:${port}: egress-limit (maxEgressBytes (1000) reached)`,
        );
      },
    );
  });

  it('drops authorization and cookie when a redirect leaves the origin, and keeps the rest', async () => {
    await withFetch(
      { allow: ['api.test', 'b.test'], allowPrivate: true },
      {
        lookup: async (hostname) =>
          hostname === 'api.test' || hostname === 'b.test'
            ? [{ address: '127.0.0.1', family: 4 }]
            : [],
      },
      async (twoHosts) => {
        const seen = expectResult(
          await twoHosts.run({
            code: `const r = await tools.fetch({ url: 'http://api.test:${port}/to-b-headers', responseType: 'json',
            headers: { authorization: 'Bearer secret', cookie: 'session=1', 'x-api-key': 'k' } });
            return [r.url, r.body.host, r.body.authorization ?? null, r.body.cookie ?? null, r.body['x-api-key']];`,
          }),
        );
        expect(seen.payload).toEqual([
          `http://b.test:${port}/headers`,
          `b.test:${port}`,
          null,
          null,
          'k',
        ]);
      },
    );
  });

  it('keeps a slow name lookup inside timeoutMs', async () => {
    await withFetch(
      { allow: ['api.test'], allowPrivate: true },
      {
        timeoutMs: 300,
        lookup: () =>
          new Promise((resolve) =>
            setTimeout(() => resolve([{ address: '127.0.0.1', family: 4 }]), 5_000),
          ),
      },
      async (slow) => {
        const started = performance.now();
        const error = expectError(
          await slow.run({ code: `return await tools.fetch({ url: 'http://api.test:${port}/' })` }),
          'RUNTIME',
        );
        expect(error.message).toContain(
          `the request to api.test:${port} timed out or was cancelled`,
        );
        expect(performance.now() - started).toBeLessThan(3_000); // the lookup takes 5 000
      },
    );
  });

  it('refuses port 0, which Node would send to the scheme’s default port past a deny entry for it', async () => {
    // The tests run as root: a server on 127.0.0.7:80 stands for the denied admin service.
    const admin = createServer((_request, response) => response.end('admin panel'));
    await new Promise<void>((resolve) => admin.listen(80, '127.0.0.7', resolve));
    let requests = 0;
    admin.on('request', () => {
      requests += 1;
    });
    try {
      await withFetch(
        {
          allow: ['*.corp.test'],
          deny: ['admin.corp.test:80', 'admin.corp.test:443'],
          allowPrivate: true,
        },
        { lookup: async () => [{ address: '127.0.0.7', family: 4 }] },
        async (corp) => {
          for (const url of ['http://admin.corp.test:0/', 'http://admin.corp.test/']) {
            const error = expectError(
              await corp.run({ code: `return await tools.fetch({ url: '${url}' })` }),
              'RUNTIME',
            );
            expect(error.message).toContain(
              url.includes(':0/')
                ? 'port 0 names no server'
                : 'egress refused admin.corp.test:80: denied',
            );
          }
        },
      );
    } finally {
      admin.close();
    }
    expect(requests).toBe(0);
  });

  it('ends a call answered 101 (Switching Protocols) at once, not at the execution’s timeout', async () => {
    const { createServer: createTcpServer } = await import('node:net');
    const upgrading = createTcpServer((socket) =>
      socket.once('data', () =>
        socket.write(
          'HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n',
        ),
      ),
    );
    const upgradePort = await new Promise<number>((resolve) =>
      upgrading.listen(0, '127.0.0.1', () => resolve((upgrading.address() as AddressInfo).port)),
    );
    try {
      await withFetch(
        { allow: ['api.test'], allowPrivate: true },
        { timeoutMs: 60_000, lookup },
        async (patient) => {
          const started = performance.now();
          const error = expectError(
            await patient.run({
              code: `return await tools.fetch({ url: 'http://api.test:${upgradePort}/' })`,
            }),
            'RUNTIME',
          );
          expect(error.message).toContain(`api.test:${upgradePort} switched protocols (101)`);
          expect(performance.now() - started).toBeLessThan(5_000); // before: the execution's 30 s timeout
        },
      );
    } finally {
      upgrading.close();
    }
  });

  it('reports what it refuses before any connection, and a connection that fails after it was allowed', async () => {
    const seen: NetworkEvent[] = [];
    const closed = createServer();
    const closedPort = await listen(closed);
    closed.close();
    await withFetch(
      { allow: ['api.test'], allowPrivate: true },
      { lookup, maxRedirects: 2, onEvent: (event) => seen.push(event) },
      async (reporting) => {
        const cases = [
          ['file:///etc/passwd', 'only http and https URLs (got file:)'],
          [`http://user:secret@api.test:${port}/`, 'no credentials in the URL'],
          [`http://api.test:0/`, 'port 0 names no server'],
          ['not a url', 'not a URL'],
          [`http://api.test:${port}/to-file`, 'only http and https URLs (got file:)'],
          [`http://api.test:${port}/loop`, 'more than 2 redirects'],
          [`http://api.test:${closedPort}/`, 'ECONNREFUSED'],
        ];
        for (const [url, message] of cases) {
          const error = expectError(
            await reporting.run({
              code: `return await tools.fetch({ url: ${JSON.stringify(url)} })`,
            }),
            'RUNTIME',
          );
          expect(error.message).toContain(message);
        }
      },
    );
    expect(
      seen
        .filter((event) => event.type === 'denied')
        .map((event) => (event.type === 'denied' ? [event.host, event.port, event.reason] : [])),
    ).toEqual([
      ['file:///etc/passwd', 0, 'protocol'],
      ['api.test', port, 'protocol'],
      ['api.test', 0, 'protocol'],
      ['not a url', 0, 'protocol'],
      ['file:///etc/passwd', 0, 'protocol'],
      ['api.test', port, 'protocol'],
      ['api.test', closedPort, 'unreachable'],
    ]);
  });
});
