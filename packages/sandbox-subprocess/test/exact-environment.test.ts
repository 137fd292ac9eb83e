// The environment a bubblewrap run's command sees is exactly its caller's, plus the variables the
// sandbox documents it always sets (docs/parser-protocol.md: HOME, PWD, SHLVL), whatever the
// names: bash, which used to export it, treats some as its own (UID read-only, SHLVL counted,
// BASH_ENV sourced, POSIXLY_CORRECT making the next read-only name fatal). Cold and pre-started,
// dropped identity and host identity. Expected values come from the tables here.
import { chmodSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import { createSandbox, type SubprocessSandbox } from '../src/index.ts';
import { prestartPoolOf } from '../src/linux/prestart-pool.ts';
import { tempDir } from './support/helpers.ts';

/** What the caller passes: names bash treats as its own, and values with odd bytes. */
const table: Record<string, string> = {
  UID: '7',
  SHLVL: '5',
  POSIXLY_CORRECT: '1',
  EUID: '3', // read-only in bash, after POSIXLY_CORRECT: it ended bash
  BASH_ENV: '/tmp/x',
  ENV: '/tmp/y',
  OLDPWD: '/usr',
  GROUPS: 'staff',
  PS1: 'p$ ',
  PPID: '1',
  RANDOM: '4',
  IFS: ':',
  BASH_COMMAND: 'c',
  _: 'underscore',
  MULTI: 'line one\nline=two=\n',
  EMPTY: '',
  SHELLISH: '$' + '{HOME} $(id) `id` \\c \\ end\\', // shell syntax, literal
  SPACES: '  a  b  ',
  UNICODE: 'é\u{1F600}',
};

/** Set by the sandbox in every bubblewrap run unless the caller sets them. */
const alwaysSet = { HOME: '/home/sandbox', PWD: '/home/sandbox', SHLVL: '0' };

const policy = {
  allowNetwork: false,
  allowFileWrites: false,
  timeoutMs: 20_000,
  allowedEnv: [] as string[],
};

/** A sandbox whose pool is warm for `env -0`, and a cold twin (its pool closed). */
async function sandboxes(runAs: 'host' | undefined) {
  const input = { ...policy, runAs };
  const warm = createSandbox(input);
  const cold = createSandbox(input);
  onTestFinished(() => Promise.all([warm.close(), cold.close()]).then(() => undefined));
  await prestartPoolOf(cold).close();
  expect((await warm.run('/usr/bin/env', ['-0'])).success).toBe(true);
  await ready(warm);
  return { warm, cold };
}

async function ready(sandbox: SubprocessSandbox): Promise<void> {
  await new Promise((resolve) => setImmediate(resolve));
  await prestartPoolOf(sandbox).settled();
  expect(prestartPoolOf(sandbox).pids().length).toBeGreaterThan(0);
}

/** The command's environment as `env -0` prints it, whether it ran warm, and its stderr. */
async function seenEnvironment(sandbox: SubprocessSandbox, env: Record<string, string>) {
  const pooled = prestartPoolOf(sandbox).pids();
  const result = await sandbox.run('/usr/bin/env', ['-0'], { env });
  const warm = pooled.some((pid) => !prestartPoolOf(sandbox).pids().includes(pid));
  const entries = result.stdout
    .split('\0')
    .slice(0, -1)
    .map((entry) => [entry.slice(0, entry.indexOf('=')), entry.slice(entry.indexOf('=') + 1)]);
  return { warm, code: result.code, stderr: result.stderr, env: Object.fromEntries(entries) };
}

describe('the command’s environment is exactly the caller’s', () => {
  it.each([
    { identity: 'dropped', runAs: undefined },
    { identity: 'host', runAs: 'host' as const },
  ])('every name and value, warm and cold ($identity identity)', async ({ runAs }) => {
    const { warm, cold } = await sandboxes(runAs);
    const expected = { env: { ...alwaysSet, ...table }, stderr: '', code: undefined };
    expect(await seenEnvironment(warm, table)).toEqual({ ...expected, warm: true });
    expect(await seenEnvironment(cold, table)).toEqual({ ...expected, warm: false });
    // Without a caller's SHLVL the documented one; each bash-owned name on its own, warm.
    for (const [name, value] of Object.entries(table)) {
      await ready(warm);
      const run = await seenEnvironment(warm, { [name]: value });
      expect(run).toEqual({ ...expected, env: { ...alwaysSet, [name]: value }, warm: true });
    }
  });
});

describe('a program whose path has an `=`', () => {
  it.each([
    { identity: 'dropped', runAs: undefined },
    { identity: 'host', runAs: 'host' as const },
  ])('runs with its argv and the exact environment ($identity identity)', async ({ runAs }) => {
    // env reads a leading `a=b` as a variable; the program must still be what runs.
    const dir = join(tempDir(), 'x=y');
    mkdirSync(dir);
    const program = join(dir, 'prog=1');
    writeFileSync(program, '#!/bin/sh\nprintf "%s\\0" "$0" "$@"; exec /usr/bin/env -0\n');
    chmodSync(join(dir, '..'), 0o755);
    chmodSync(dir, 0o755);
    chmodSync(program, 0o755);
    const sandbox = createSandbox({ ...policy, runAs });
    onTestFinished(() => sandbox.close());
    const result = await sandbox.run(program, ['a=1', 'b'], { env: { UID: '7' } });
    expect({ code: result.code, stderr: result.stderr }).toEqual({ code: undefined, stderr: '' });
    const fields = result.stdout.split('\0').slice(0, -1);
    expect(fields.slice(0, 3)).toEqual([program, 'a=1', 'b']);
    expect(fields.slice(3).sort()).toEqual(
      Object.entries({ ...alwaysSet, UID: '7' }).map(([name, value]) => `${name}=${value}`),
    );
  });
});
