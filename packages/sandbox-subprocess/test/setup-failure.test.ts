// A run whose confinement cannot be set up never reports RUNTIME or its controls: it is
// UNAVAILABLE with the setup's reason and sandboxApplied false. The case a new user meets first:
// a rootless container (a user namespace that maps only the user's own uid as root), where
// uid 65534 is not mapped and setpriv cannot drop to it. Reproduced with `unshare -U -r`.
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { createSandbox } from '../src/index.ts';
import { node } from './support/helpers.ts';

const index = join(import.meta.dirname, '../src/index.ts');

/** Runs `body` (an async module body with `createSandbox` in scope) in a rootless namespace. */
function inRootlessNamespace(body: string): unknown[] {
  const script = `const { createSandbox } = await import(${JSON.stringify(index)});\n${body}`;
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
  return out
    .trim()
    .split('\n')
    .map((line) => JSON.parse(line) as unknown);
}

const setupFailure = {
  success: false,
  code: 'UNAVAILABLE',
  error:
    'The sandbox could not be set up, so the command never started: setpriv: setresuid failed: Invalid argument',
  stdout: '',
  sandboxApplied: false,
  controls: [],
};

describe('a sandbox whose setup fails', () => {
  it('in a rootless namespace: UNAVAILABLE, nothing applied, for run, execSync and strict', () => {
    const [run, sync, strict] = inRootlessNamespace(`
      const print = (r) => console.log(JSON.stringify(r));
      print(await createSandbox().run('/bin/echo', ['hi']));
      print(createSandbox().execSync('/bin/echo hi'));
      print(await createSandbox({ strict: true }).run('/bin/echo', ['hi']));
    `);
    for (const result of [run, sync, strict]) expect(result).toMatchObject(setupFailure);
  });

  it('a command that fails by itself, with a setup-like message, is still RUNTIME', async () => {
    const result = await createSandbox().run('/bin/sh', [
      '-c',
      'echo "setpriv: setresuid failed: Invalid argument" >&2; exit 127',
    ]);
    expect(result).toMatchObject({
      success: false,
      code: 'RUNTIME',
      exitCode: 127,
      sandboxApplied: true,
    });
    expect(result.controls.length).toBeGreaterThan(10);
    const sync = createSandbox().execSync('/bin/false');
    expect(sync).toMatchObject({
      success: false,
      code: 'RUNTIME',
      exitCode: 1,
      sandboxApplied: true,
    });
  });
});
