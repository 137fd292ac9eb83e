// A run whose confinement cannot be set up never reports RUNTIME or its controls: it is
// UNAVAILABLE with the setup's reason, sandboxApplied false and confinement 'none'. The real
// bwrap runs behind a small script that, for a run (not for the probe), prints the refusal a host
// that locks /proc prints and exits 1 before the command, as bwrap itself does. And a rootless
// container (`unshare -U -r`, only the caller's uid mapped, where setpriv cannot drop to 65534)
// runs as the caller and says so.
import { execFileSync } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { createSandbox, SandboxControl } from '../src/index.ts';
import { node } from './support/helpers.ts';

const hostPath = process.env.PATH;
const refusal = "bwrap: Can't mount proc on /newroot/proc: Operation not permitted";
const bin = mkdtempSync(join(tmpdir(), 'coda-setup-bwrap-'));
writeFileSync(
  join(bin, 'bwrap'),
  `#!/bin/sh\nfor a in "$@"; do if [ "$a" = --args ]; then echo "${refusal}" >&2; exit 1; fi; done\nexec /usr/bin/bwrap "$@"\n`,
);
chmodSync(join(bin, 'bwrap'), 0o755);
for (const tool of ['true', 'prlimit', 'setpriv', 'perl'])
  symlinkSync(`/usr/bin/${tool}`, join(bin, tool));

afterEach(() => {
  process.env.PATH = hostPath;
});
afterAll(() => rmSync(bin, { recursive: true, force: true }));

const setupFailure = {
  success: false,
  code: 'UNAVAILABLE',
  error: `The sandbox could not be set up, so the command never started: ${refusal}`,
  stdout: '',
  exitCode: 1,
  sandboxApplied: false,
  confinement: 'none',
  controls: [],
};

describe('a sandbox whose setup fails', () => {
  it('bwrap refusing at run time: UNAVAILABLE, nothing applied, for run, execSync and strict', async () => {
    process.env.PATH = `${bin}:${hostPath}`;
    const run = await createSandbox().run('/bin/echo', ['hi']);
    const sync = createSandbox().execSync('/bin/echo hi');
    const strict = await createSandbox({ strict: true }).run('/bin/echo', ['hi']);
    for (const result of [run, sync, strict]) expect(result).toMatchObject(setupFailure);
  });

  it('a command that fails by itself, with a setup-like message, is still RUNTIME', async () => {
    const result = await createSandbox().run('/bin/sh', ['-c', `echo "${refusal}" >&2; exit 1`]);
    expect(result).toMatchObject({
      success: false,
      code: 'RUNTIME',
      exitCode: 1,
      sandboxApplied: true,
    });
    expect(result.controls).toContain(SandboxControl.seccomp);
    const sync = createSandbox().execSync('/bin/false');
    expect(sync).toMatchObject({
      success: false,
      code: 'RUNTIME',
      exitCode: 1,
      sandboxApplied: true,
    });
  });

  it('in a rootless namespace the command runs as the caller, and the result says so', () => {
    const index = join(import.meta.dirname, '../src/index.ts');
    const script = `const { createSandbox } = await import(${JSON.stringify(index)});
      console.log(JSON.stringify(await createSandbox().run('/usr/bin/id', ['-u'])));`;
    const out = execFileSync(
      'unshare',
      [
        '--user',
        '--map-root-user',
        node,
        '--conditions=@coda/source',
        '--input-type=module',
        '-e',
        script,
      ],
      { encoding: 'utf8', timeout: 60_000 },
    );
    const result = JSON.parse(out) as { stdout: string; confinement: string; controls: string[] };
    expect(result).toMatchObject({
      success: true,
      stdout: '0\n',
      confinement: 'bubblewrap-as-caller',
    });
    expect(result.controls).toContain(SandboxControl.hostIdentity);
    expect(result.controls).not.toContain(SandboxControl.unprivilegedIdentity);
  });
});
