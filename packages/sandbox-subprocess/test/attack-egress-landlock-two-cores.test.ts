// The proxy-listener check (sandbox-core proxy-listeners.ts) keeps the listeners' ports in a
// module of @coda/sandbox-core. An application with two copies of that package loaded (two
// versions installed side by side: the changeset bumps core a minor, 0.x carets do not cross
// minors, so a subprocess layer on core 0.1 beside a parser host or fetch tool on core 0.2 gives
// two) has two registries: a run's listener is recorded in the copy its proxy imported, and an
// admission made by the other copy does not see it. Here run B is this workspace's subprocess
// layer; run A is a second install of the same layer with its own copy of core, as an
// application would have it. A, allowed loopback (`allowPrivate`), tunnels into B's listener as
// in attack-egress-landlock-chain.test.ts. Expected from the policies alone: A reaches nothing
// A's policy does not name, the API server sees no request, B's report stays empty.
import {
  cpSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSandbox, type SubprocessSandbox } from '../src/index.ts';
import { startHttp, type TestServer, tableLookup } from './support/egress-servers.ts';
import { useLandlockBackend } from './support/fake-bwrap.ts';
import { tunnelIntoListener } from './support/listener-chain.ts';

const here = dirname(fileURLToPath(import.meta.url));
const packages = resolve(here, '../..');

/** A second install of `name` (its sources, another version) at `to`, resolving its own deps. */
function install(name: 'sandbox-core' | 'sandbox-subprocess', to: string, version: string): void {
  mkdirSync(to, { recursive: true });
  cpSync(join(packages, name, 'src'), join(to, 'src'), {
    recursive: true,
    filter: (source) => !source.endsWith('.test.ts'),
  });
  const manifest = JSON.parse(readFileSync(join(packages, name, 'package.json'), 'utf8'));
  manifest.version = version;
  manifest.exports = { '.': './src/index.ts', './package.json': './package.json' };
  writeFileSync(join(to, 'package.json'), JSON.stringify(manifest));
}

let root: string;
let api: TestServer;
let requests = 0;
let a: { run: SubprocessSandbox['run']; close(): Promise<void> };
let b: SubprocessSandbox;

useLandlockBackend();

beforeAll(async () => {
  // app/core-0.2 and app/subprocess-0.2, and app/node_modules naming them (and the real zod and
  // execa): the second subprocess layer imports the second core.
  root = mkdtempSync(join(tmpdir(), 'coda-two-cores-'));
  install('sandbox-core', join(root, 'core-0.2'), '0.2.0');
  install('sandbox-subprocess', join(root, 'subprocess-0.2'), '0.2.0');
  const modules = join(root, 'node_modules');
  mkdirSync(join(modules, '@coda'), { recursive: true });
  symlinkSync(join(root, 'core-0.2'), join(modules, '@coda', 'sandbox-core'));
  for (const dependency of ['zod', 'execa']) {
    const real = join(packages, 'sandbox-subprocess', 'node_modules', dependency);
    symlinkSync(real, join(modules, dependency));
  }
  const second = (await import(
    /* @vite-ignore */ join(root, 'subprocess-0.2', 'src', 'index.ts')
  )) as typeof import('../src/index.ts');
  expect(second.createSandbox).not.toBe(createSandbox); // a copy of its own
  api = await startHttp((_request, response) => {
    requests++;
    response.end('api secret\n');
  });
  a = second.createSandbox(
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
  if (root !== undefined) rmSync(root, { recursive: true, force: true });
});

describe("a run's proxy listener, from a run of a second copy of the packages", () => {
  it("a tunnel into another run's listener is refused whichever copy of sandbox-core admits it", async () => {
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
