// npm install inside the subprocess sandbox with a network allowlist: a package published to a
// local Verdaccio (no uplink: nothing leaves loopback) installs from an allowed registry name,
// reached through the host's egress proxy; the same registry under another name is refused and
// the denial reported.
import { execFile } from 'node:child_process';
import { chmodSync, chownSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { createSandbox } from '@coda/sandbox-subprocess';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type LocalRegistry, startRegistry } from './support/registry.ts';

const run = promisify(execFile);
let dir: string;
let registry: LocalRegistry;
let port: number;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'coda-egress-npm-'));
  registry = await startRegistry(join(dir), { uplink: false });
  port = Number(new URL(registry.url).port);
  const pkg = join(dir, 'pkg');
  await run('mkdir', ['-p', pkg]);
  writeFileSync(
    join(pkg, 'package.json'),
    JSON.stringify({ name: 'egress-fixture', version: '1.0.0', main: 'index.js', license: 'MIT' }),
  );
  writeFileSync(join(pkg, 'index.js'), "module.exports = 'installed through the proxy';\n");
  writeFileSync(join(pkg, '.npmrc'), `${registry.authLine}\n`);
  await run('npm', ['publish', '--registry', registry.url, '--userconfig', join(pkg, '.npmrc')], {
    cwd: pkg,
  });
});

afterAll(async () => {
  await registry?.stop();
  rmSync(dir, { recursive: true, force: true });
});

function project(): string {
  const path = mkdtempSync(join(tmpdir(), 'coda-egress-project-'));
  if (process.getuid?.() === 0) chownSync(path, 65534, 65534);
  chmodSync(path, 0o755);
  writeFileSync(join(path, 'package.json'), '{"name":"p","version":"1.0.0","private":true}');
  if (process.getuid?.() === 0) chownSync(join(path, 'package.json'), 65534, 65534);
  return path;
}

describe('npm install through the egress proxy', () => {
  it('installs from an allowed registry host and is refused, with a report, for another', async () => {
    await using sandbox = createSandbox(
      {
        network: { allow: ['registry.test'], allowPrivate: true },
        timeoutMs: 120_000,
        maxMemoryMb: 0,
      },
      { lookup: async () => [{ address: '127.0.0.1', family: 4 }] },
    );
    const cwd = project();
    const npm = (registryUrl: string) =>
      sandbox.run(
        'npm',
        [
          'install',
          '--no-audit',
          '--no-fund',
          '--cache',
          join(cwd, '.npm-cache'),
          '--registry',
          registryUrl,
          'egress-fixture',
        ],
        { cwd },
      );
    const ok = await npm(`http://registry.test:${port}/`);
    expect(ok.stderr).not.toContain('ERR');
    expect(ok.success).toBe(true);
    const installed = await sandbox.run('node', ['-p', "require('egress-fixture')"], { cwd });
    expect(installed.stdout).toBe('installed through the proxy\n');
    expect(ok.network?.allowed.map((entry) => `${entry.host}:${entry.port}`)).toEqual([
      `registry.test:${port}`,
    ]);
    expect(ok.network?.denied).toEqual([]);
    const refused = await npm(`http://mirror.test:${port}/`);
    expect(refused.success).toBe(false);
    expect(refused.network?.denied[0]).toEqual({
      host: 'mirror.test',
      port,
      reason: 'not-allowed',
      detail: `mirror.test:${port} matches no allow entry`,
    });
    rmSync(cwd, { recursive: true, force: true });
  });
});
