// Runs start from warm launchers: shells that joined a fresh pair of per-run cgroups before the
// run was asked for. Each run must still get its own groups with its own limits, the pool must
// not keep the host alive or leave anything behind, and a launcher that died is never used.
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { createSandbox, SandboxControl } from '../src/index.ts';
import { detectCgroups } from '../src/linux/cgroup.ts';
import { pooledLauncherPids, refillsSettled, takeLauncher } from '../src/linux/launcher-pool.ts';
import { prestartPoolOf } from '../src/linux/prestart-pool.ts';
import { node } from './support/helpers.ts';

/** Prints the limits of the command's own memory and pids groups, and the group names. */
const ownLimits = [
  '-c',
  [
    'mem=$(grep :memory: /proc/self/cgroup | cut -d: -f3)',
    'pids=$(grep :pids: /proc/self/cgroup | cut -d: -f3)',
    'cat /sys/fs/cgroup/memory$mem/memory.limit_in_bytes /sys/fs/cgroup/pids$pids/pids.max',
    'echo "$mem" "$pids"',
  ].join('; '),
];

/** Lets the pool's background refill finish (it starts on the next turn of the loop). */
const immediate = async (): Promise<void> => {
  await new Promise((resolve) => setImmediate(resolve));
  await refillsSettled();
};

describe('warm launchers', () => {
  it('give every run its own fresh groups with exactly its limits', async () => {
    const sandbox = createSandbox({ timeoutMs: 10_000 });
    const limits = [
      { maxMemoryMb: 300, rlimits: { processes: 50 } },
      { maxMemoryMb: 200, rlimits: { processes: 77 } },
      { maxMemoryMb: 300, rlimits: { processes: 50 } },
      { maxMemoryMb: 1024, rlimits: { processes: 4_000 } },
      { maxMemoryMb: 2048, rlimits: { processes: 40 } },
    ];
    const groups: string[] = [];
    for (const [index, options] of limits.entries()) {
      await immediate(); // all but the first run start from a launcher with placeholder limits
      if (index > 0) expect(pooledLauncherPids().length).toBeGreaterThan(0);
      // /sys is not in the view: the test adds the cgroup tree to read its own limits.
      const result = await sandbox.run('/bin/sh', ownLimits, {
        ...options,
        readOnlyPaths: ['/sys/fs/cgroup'],
      });
      expect(result.controls).toEqual(
        expect.arrayContaining([
          SandboxControl.memoryCgroupV1,
          SandboxControl.pidsCgroupV1,
          SandboxControl.killCgroup,
        ]),
      );
      const [memory, pids, names] = result.stdout.trim().split('\n');
      expect(Number(memory)).toBe(options.maxMemoryMb * 1024 * 1024);
      expect(Number(pids)).toBe(options.rlimits.processes);
      groups.push(names!);
    }
    expect(new Set(groups).size).toBe(limits.length);
    // Used groups go away in the background.
    const support = detectCgroups();
    await expect
      .poll(
        () =>
          groups.filter((names) =>
            existsSync(join(support.pids!.base, names.split(' ')[1]!.split('/').at(-1)!)),
          ),
        { timeout: 5_000 },
      )
      .toEqual([]);
  });

  it('start a run from the pool once it is warm', async () => {
    const sandbox = createSandbox({ timeoutMs: 10_000 });
    // Without pre-started sandboxes (prestarted.test.ts), which would serve this run first.
    await prestartPoolOf(sandbox).close();
    await sandbox.run('/bin/true');
    await immediate();
    const pooled = pooledLauncherPids();
    const child = sandbox.spawn('/bin/echo', ['warm']);
    expect(pooled).toContain(child.pid);
    child.stdin.end();
    const exit = await child.exited;
    expect(exit).toMatchObject({ exitCode: 0, timedOut: false });
  });

  it('keeps the caller input for the command (the launcher reads only its line)', async () => {
    const sandbox = createSandbox({ timeoutMs: 10_000 });
    await sandbox.run('/bin/true'); // fills the pool
    await immediate();
    const input = 'first line\nsecond line\n\u00e9\u00e8 no newline at the end';
    const result = await sandbox.run('/bin/cat', [], { input });
    expect(result).toMatchObject({ success: true, stdout: input, sandboxApplied: true });
  });

  it('passes arguments, environment and cwd through the line unchanged', async () => {
    const sandbox = createSandbox({ timeoutMs: 10_000, env: { QUOTED: `it's "$HOME" \`x\` \\` } });
    await sandbox.run('/bin/true');
    await immediate();
    const args = ["a'b", '$(id)', '; echo no', '*', ''];
    const result = await sandbox.run('/bin/sh', [
      '-c',
      'printf "%s|" "$@"; echo; echo "$QUOTED"; pwd; env | cut -d= -f1 | sort | tr "\\n" " "',
      'sh',
      ...args,
    ]);
    const [printed, quoted, cwd, names] = result.stdout.split('\n');
    expect(printed).toBe(`${args.join('|')}|`);
    expect(quoted).toBe(`it's "$HOME" \`x\` \\`);
    expect(cwd).toBe('/home/sandbox');
    expect(names?.trim().split(' ')).not.toContain('OLDPWD');
  });

  it('never hands out a launcher that died while pooled', async () => {
    const support = detectCgroups();
    const shape = { memory: true, pids: true, extraPipes: 2, detached: false };
    takeLauncher(support, shape); // creates the pool, refilled on the next turn
    await immediate();
    const first = takeLauncher(support, shape);
    expect(first?.child.pid).toBeGreaterThan(0);
    first!.child.kill('SIGKILL');
    await immediate();
    const second = takeLauncher(support, shape);
    expect(second?.child.pid).toBeGreaterThan(0);
    second!.child.kill('SIGKILL');
    await new Promise((resolve) => second!.child.once('exit', resolve));
    // The pool (refilled after `first`) may still hold the dead one's sibling, never the dead one.
    const third = takeLauncher(support, shape);
    expect(third?.child.pid).not.toBe(second!.child.pid);
    third?.child.kill('SIGKILL');
    for (const launcher of [first!, second!, ...(third === undefined ? [] : [third])]) {
      await launcher.cgroups.kill();
      await launcher.cgroups.remove();
    }
  });

  it('do not keep the host alive, and leave no process or group behind', () => {
    const script = [
      "import { createSandbox } from './src/index.ts';",
      'const sandbox = createSandbox({ timeoutMs: 10_000 });',
      "for (let i = 0; i < 3; i++) await sandbox.run('/bin/true');",
      'await new Promise((resolve) => setImmediate(resolve));',
      'console.log(process.pid);',
    ].join('\n');
    const started = performance.now();
    const output = execFileSync(
      node,
      ['--conditions=@coda/source', '--input-type=module', '-e', script],
      {
        cwd: join(import.meta.dirname, '..'),
        encoding: 'utf8',
        timeout: 20_000,
      },
    );
    expect(performance.now() - started).toBeLessThan(15_000);
    const pid = output.trim();
    const support = detectCgroups();
    const bases = [support.memory, support.pids].map((hierarchy) =>
      join(hierarchy!.base, '..', `coda-sandbox-${pid}`),
    );
    // A group holding a process cannot be removed: no base left means nothing kept running.
    expect(bases.filter((base) => existsSync(base))).toEqual([]);
  });
});

describe('a host killed by a signal', () => {
  it('leaves no launcher group behind: launchers clean up when their instructions pipe closes', async () => {
    const script = [
      "import { createSandbox } from './src/index.ts';",
      'const sandbox = createSandbox({ timeoutMs: 10_000 });',
      "await sandbox.run('/bin/true');",
      'await new Promise((resolve) => setTimeout(resolve, 300));',
      'console.log(process.pid);',
      "process.kill(process.pid, 'SIGTERM');",
    ].join('\n');
    const result = spawnSync(
      node,
      ['--conditions=@coda/source', '--input-type=module', '-e', script],
      { cwd: join(import.meta.dirname, '..'), encoding: 'utf8', timeout: 20_000 },
    );
    expect(result.signal).toBe('SIGTERM');
    const pid = result.stdout.trim();
    const support = detectCgroups();
    const bases = [support.memory, support.pids].map((hierarchy) =>
      join(hierarchy!.base, '..', `coda-sandbox-${pid}`),
    );
    await expect
      .poll(() => bases.filter((base) => existsSync(base)), { timeout: 5_000 })
      .toEqual([]);
  });
});

describe('capabilities', () => {
  it('describe this host (bubblewrap, cgroup v1 memory and pids) without running a command', () => {
    const started = performance.now();
    expect(createSandbox().capabilities()).toEqual({
      platform: 'linux',
      confined: true,
      confinement: 'bubblewrap',
      bubblewrap: true,
      seccomp: true,
      networkNamespace: true,
      memoryMechanism: 'cgroup-v1',
      pidsCgroup: true,
      cgroupKill: true,
      reason: undefined,
    });
    expect(performance.now() - started).toBeLessThan(1_000);
    expect(createSandbox({ enabled: false }).capabilities()).toMatchObject({
      confined: false,
      confinement: 'none',
      memoryMechanism: 'none',
      reason: 'sandbox disabled by policy',
    });
  });
});

const repositoryRoot = join(import.meta.dirname, '..', '..', '..');

describe('without a writable memory cgroup', () => {
  it('reports rlimit-data and honours memoryFallback', () => {
    // A read-only bind of / makes the cgroup file systems read-only for the fixture.
    const result = spawnSync(
      '/usr/bin/bwrap',
      [
        '--ro-bind',
        '/',
        '/',
        '--dev',
        '/dev',
        '--proc',
        '/proc',
        '--unshare-pid',
        '--tmpfs',
        '/tmp',
        // A checkout under /tmp (as CI may use) stays visible above the private /tmp.
        '--ro-bind',
        repositoryRoot,
        repositoryRoot,
        '--',
        node,
        '--conditions=@coda/source',
        join(import.meta.dirname, 'fixtures', 'no-cgroups.ts'),
      ],
      { cwd: join(import.meta.dirname, '..'), encoding: 'utf8', timeout: 30_000 },
    );
    expect(result.stderr).toBe('');
    const report = JSON.parse(result.stdout);
    expect(report.capabilities).toMatchObject({
      platform: 'linux',
      memoryMechanism: 'rlimit-data',
      pidsCgroup: false,
      cgroupKill: false,
    });
    expect(report.byDefault).toEqual({
      success: true,
      stdout: `${256 * 1024}\n`,
      memory: [SandboxControl.rlimitData, SandboxControl.memoryRlimitData],
    });
    expect(report.none).toEqual({ success: true, stdout: 'unlimited\n', memory: [] });
    expect(report.refuse).toMatchObject({ success: false, memory: [] });
    expect(report.refuse.error).toMatch(/memoryFallback is "refuse"/);
  });
});
