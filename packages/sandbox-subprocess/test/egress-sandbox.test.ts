// Real programs in the real sandbox with a network allowlist: curl, Node's fetch, python3's
// urllib and git reach an allowed host by name through the host's proxy (a resolver the test
// controls maps the names to loopback servers the test starts) and fail for another host with a
// reported denial; a program ignoring the proxy gets a connection error.
import { execFileSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { NetworkEvent } from '@coda/sandbox-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSandbox, SandboxControl, type SubprocessSandbox } from '../src/index.ts';
import {
  makeCertificate,
  startHttp,
  startHttps,
  type TestServer,
  tableLookup,
} from './support/egress-servers.ts';
import { node, python, tempDir } from './support/helpers.ts';

const body = 'hello from api.test\n';
let http: TestServer;
let https: TestServer;
let files: string;
let caFile: string;
let sandbox: SubprocessSandbox;

beforeAll(async () => {
  files = mkdtempSync(join(tmpdir(), 'coda-egress-files-'));
  chmodSync(files, 0o755);
  const certificate = makeCertificate(['secure.test', 'other.test']);
  caFile = join(files, 'ca.pem');
  writeFileSync(caFile, certificate.cert);
  chmodSync(caFile, 0o644);
  // A bare repository served over git's dumb HTTP protocol (static files).
  const work = join(files, 'work');
  mkdirSync(work);
  const git = (...args: string[]) =>
    execFileSync('git', ['-c', 'user.name=t', '-c', 'user.email=t@t', ...args], {
      cwd: work,
      stdio: 'ignore',
    });
  git('init', '-q', '-b', 'main');
  writeFileSync(join(work, 'README'), 'cloned through the proxy\n');
  git('add', 'README');
  git('commit', '-q', '-m', 'one');
  execFileSync('git', ['clone', '-q', '--bare', work, join(files, 'repo.git')], {
    stdio: 'ignore',
  });
  execFileSync('git', ['update-server-info'], { cwd: join(files, 'repo.git') });
  const { readFileSync, existsSync, statSync } = await import('node:fs');
  http = await startHttp((request, response) => {
    const url = request.url ?? '/';
    if (url.startsWith('/repo.git/')) {
      const path = join(files, url.split('?')[0]!);
      if (existsSync(path) && statSync(path).isFile()) response.end(readFileSync(path));
      else response.writeHead(404).end();
      return;
    }
    response.end(body);
  });
  https = await startHttps((_request, response) => response.end(body), certificate);
  sandbox = createSandbox(
    {
      network: { allow: ['api.test', 'secure.test', 'git.test'], allowPrivate: true },
      timeoutMs: 30_000,
    },
    {
      lookup: tableLookup({
        'api.test': http.address,
        'git.test': http.address,
        'other.test': http.address,
        'secure.test': https.address,
      }),
    },
  );
});

afterAll(async () => {
  rmSync(files, { recursive: true, force: true });
  await sandbox?.close();
  await http?.close();
  await https?.close();
});

const deniedOther = (port: number) => ({
  host: 'other.test',
  port,
  reason: 'not-allowed',
  detail: `other.test:${port} matches no allow entry`,
});

describe('a network allowlist, with real programs', () => {
  it('curl: an allowed host over HTTP and HTTPS, another refused with its reason', async () => {
    const mark = http.closedConnections.length;
    const plain = await sandbox.run('curl', ['-sS', `http://api.test:${http.port}/`]);
    expect(plain.stdout).toBe(body);
    expect(plain.controls).toContain(SandboxControl.networkNamespace);
    expect(plain.controls).toContain(SandboxControl.egressProxy);
    const [server] = await http.connectionsClosed(mark, 1);
    if (server === undefined) throw new Error('the server saw no connection close');
    expect(plain.network?.allowed).toEqual([
      {
        host: 'api.test',
        port: http.port,
        // What the upstream connection carried, heads included, as the server counted it.
        bytes: server.read + server.written,
        bytesSent: server.read,
        bytesReceived: server.written,
        connections: 1,
      },
    ]);
    expect(server.written).toBeGreaterThan(body.length); // the response head counts too
    const tls = await sandbox.run('curl', ['-sS', '--cacert', caFile, 'https://secure.test/'], {
      readOnlyPaths: [files],
    });
    expect(tls.stderr).toBe('');
    expect(tls.stdout).toBe(body);
    expect(tls.network?.allowed.map((entry) => `${entry.host}:${entry.port}`)).toEqual([
      'secure.test:443',
    ]);
    const refused = await sandbox.run('curl', ['-sS', '--cacert', caFile, 'https://other.test/'], {
      readOnlyPaths: [files],
    });
    expect(refused.success).toBe(false);
    expect(refused.stderr).toContain('CONNECT tunnel failed, response 403');
    expect(refused.network).toEqual({ allowed: [], denied: [deniedOther(443)] });
  });

  it('node: fetch goes through the proxy (NODE_USE_ENV_PROXY=1 is set for it)', async () => {
    const script = (url: string) =>
      `fetch(${JSON.stringify(url)}).then(async (r) => console.log(r.status, await r.text()), (e) => { console.log('failed', e.cause?.code ?? e.message); process.exitCode = 3; })`;
    const ok = await sandbox.run(node, ['-e', script('https://secure.test/')], {
      env: { NODE_EXTRA_CA_CERTS: caFile },
      readOnlyPaths: [files],
    });
    expect(ok.stdout).toBe(`200 ${body}\n`);
    expect(ok.network?.allowed.map((entry) => entry.host)).toEqual(['secure.test']);
    const refused = await sandbox.run(node, ['-e', script(`http://other.test:${http.port}/`)]);
    expect(refused.network?.denied).toEqual([deniedOther(http.port)]);
  });

  it('python3: urllib through the proxy; another host gets a 403 naming the reason', async () => {
    const script = (url: string) =>
      `import urllib.request, urllib.error\ntry:\n print(urllib.request.urlopen(${JSON.stringify(url)}, timeout=10).read().decode(), end="")\nexcept urllib.error.HTTPError as e:\n print(e.code, e.read().decode(), end="")`;
    const ok = await sandbox.run(python, ['-c', script(`http://api.test:${http.port}/`)]);
    expect(ok.stdout).toBe(body);
    const refused = await sandbox.run(python, ['-c', script(`http://other.test:${http.port}/`)]);
    expect(refused.stdout).toBe(
      `403 coda-sandbox egress proxy refused other.test:${http.port}: not-allowed (other.test:${http.port} matches no allow entry)\n`,
    );
    expect(refused.network?.denied).toEqual([deniedOther(http.port)]);
  });

  it('git: clones over HTTP from an allowed host, and not from another', async () => {
    const cwd = tempDir();
    const ok = await sandbox.run(
      'git',
      ['clone', '-q', `http://git.test:${http.port}/repo.git`, 'out'],
      { cwd },
    );
    expect(ok.stderr).toBe('');
    const readme = await sandbox.run('cat', ['out/README'], { cwd });
    expect(readme.stdout).toBe('cloned through the proxy\n');
    expect(ok.network?.allowed[0]).toMatchObject({ host: 'git.test', port: http.port });
    const refused = await sandbox.run(
      'git',
      ['clone', '-q', `http://other.test:${http.port}/repo.git`, 'other'],
      { cwd },
    );
    expect(refused.success).toBe(false);
    expect(refused.network?.denied[0]).toEqual(deniedOther(http.port));
  });

  it('a program that ignores the proxy gets a connection error, not a route around it', async () => {
    const script = `import socket\nfor host in ("127.0.0.1", "${http.address}", "169.254.169.254", "10.0.0.1", "::1"):\n try:\n  socket.create_connection((host, ${http.port}), 2).close(); print(host, "connected")\n except OSError as e: print(host, e.__class__.__name__)`;
    const result = await sandbox.run(python, ['-c', script]);
    expect(result.stdout.trim().split('\n')).toEqual([
      '127.0.0.1 ConnectionRefusedError',
      `${http.address} ConnectionRefusedError`,
      '169.254.169.254 OSError',
      '10.0.0.1 OSError',
      '::1 ConnectionRefusedError',
    ]);
    expect(result.network).toEqual({ allowed: [], denied: [] });
  });

  it('a spawned command emits each allowed and refused connection as it happens', async () => {
    const child = sandbox.spawn('sh', [
      '-c',
      `curl -sS http://api.test:${http.port}/ >/dev/null; curl -sS http://other.test:${http.port}/ >/dev/null`,
    ]);
    const events: NetworkEvent[] = [];
    child.network?.on('event', (event) => events.push(event));
    child.stdin.end();
    child.stdout.resume();
    child.stderr.resume();
    await child.exited;
    expect(events.map((event) => `${event.type} ${event.host}:${event.port}`)).toEqual([
      `allowed api.test:${http.port}`,
      `denied other.test:${http.port}`,
    ]);
    expect(child.network?.report().denied).toEqual([deniedOther(http.port)]);
  });

  it('execSync with a network allowlist does not start (the proxy needs the event loop)', () => {
    const result = sandbox.execSync('true');
    expect(result.success).toBe(false);
    expect(result.success === false && result.code).toBe('UNAVAILABLE');
  });
});
