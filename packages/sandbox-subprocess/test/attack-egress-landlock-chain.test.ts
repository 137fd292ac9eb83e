// A Landlock run's proxy listener is a TCP port on the host's 127.0.0.1. docs/security.md said
// other sandboxes' runs cannot reach it (their Landlock rules name their own port). Through
// their own proxy they can, when their policy reaches loopback (`allowPrivate`, or a loopback
// CIDR): a tunnel to 127.0.0.1:PORT of another run's listener, and a request inside it, which
// that run's proxy judges by that run's policy and counts in that run's report. Found by this
// attack round: run A (allowed only `loop.test`, a name for 127.0.0.1) fetched `api.test`, which
// only run B allows; A's report showed `loop.test`, B's showed A's request as its own.
// Expected here, from the policies alone: A reaches nothing A's policy does not name, the API
// server sees no request, B's report stays empty.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSandbox, type SubprocessSandbox } from '../src/index.ts';
import { startHttp, type TestServer, tableLookup } from './support/egress-servers.ts';
import { useLandlockBackend } from './support/fake-bwrap.ts';
import { tunnelIntoListener } from './support/listener-chain.ts';

let api: TestServer;
let requests = 0;
let a: SubprocessSandbox;
let b: SubprocessSandbox;

// bubblewrap refused, as in a container: the Landlock backend runs the commands.
useLandlockBackend();

beforeAll(async () => {
  api = await startHttp((_request, response) => {
    requests++;
    response.end('api secret\n');
  });
  a = createSandbox(
    { network: { allow: ['loop.test'], allowPrivate: true }, timeoutMs: 30_000 },
    { lookup: tableLookup({ 'loop.test': '127.0.0.1' }) },
  );
  b = createSandbox(
    { network: { allow: ['api.test'], allowPrivate: true }, timeoutMs: 30_000 },
    { lookup: tableLookup({ 'api.test': api.address }) },
  );
});

afterAll(async () => {
  await a?.close();
  await b?.close();
  await api?.close();
});

describe("a run's proxy listener, from another run's proxy", () => {
  it("a tunnel into another run's listener is refused; its policy and report are not another's (broke: fixed in sandbox-core admit.ts)", async () => {
    const { stderr, other, seen } = await tunnelIntoListener(a, b, `api.test:${api.port}`);
    expect(stderr).toBe('');
    expect({ ...seen, requests }).toEqual({
      told: 'connect HTTP/1.1 403 Forbidden',
      requests: 0,
      bAllowed: [],
      aAllowed: [],
      aDenied: [{ host: 'loop.test', port: other, reason: 'private-address' }],
    });
  });
});
