// An independent attack of the pre-started sandboxes (src/linux/prestart-pool.ts,
// prestart-stub.ts): state a sandbox set up before its run carries into it, the stub's pipe
// protocol, the pool key, host changes between the pre-start and the run, cancellation and
// concurrency, and whether a warm result says exactly what a cold one says. Real bubblewrap on
// the real kernel. Each expected value comes from the test's own tables or from a cold twin (a
// sandbox whose pool is closed), never from the pool's code.

import { spawnSync } from 'node:child_process';
import {
  chmodSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  realpathSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import { createSandbox, type SubprocessSandbox } from '../src/index.ts';
import { prestartPoolOf } from '../src/linux/prestart-pool.ts';
import { collectSpawned, node, python, tempDir, token } from './support/helpers.ts';

const policy = { allowNetwork: false, allowFileWrites: false, timeoutMs: 20_000 } as const;
type PolicyInput = Parameters<typeof createSandbox>[0];

/** A sandbox closed after the test whose pool holds ready sandboxes for its default runs. */
async function warmSandbox(input: PolicyInput = policy): Promise<SubprocessSandbox> {
  const sandbox = createSandbox(input);
  onTestFinished(() => sandbox.close());
  expect((await sandbox.run('/bin/true')).success).toBe(true);
  await ready(sandbox);
  return sandbox;
}

/** The same policy with no pool: every run starts cold. */
async function coldTwin(input: PolicyInput = policy): Promise<SubprocessSandbox> {
  const sandbox = createSandbox(input);
  onTestFinished(() => sandbox.close());
  await prestartPoolOf(sandbox).close();
  return sandbox;
}

/** Waits for the pool's refills (started after a run's exit) and asserts one is ready. */
async function ready(sandbox: SubprocessSandbox): Promise<void> {
  await new Promise((resolve) => setImmediate(resolve));
  await prestartPoolOf(sandbox).settled();
  expect(prestartPoolOf(sandbox).pids().length).toBeGreaterThan(0);
}

/** Spawns `args` and collects it; `warm` says whether a pre-started sandbox ran it. */
async function spawnRun(
  sandbox: SubprocessSandbox,
  file: string,
  args: string[],
  options: Parameters<SubprocessSandbox['spawn']>[2] = {},
) {
  const pooled = prestartPoolOf(sandbox).pids();
  const child = sandbox.spawn(file, args, options);
  child.stdin.end();
  const { stdout, stderr, exit } = await collectSpawned(child);
  return { warm: pooled.includes(child.pid!), stdout, stderr, exit };
}

/** `run()`'s result without its duration, and whether a pre-started sandbox served it. */
async function runResult(
  sandbox: SubprocessSandbox,
  script: string,
  options: Parameters<SubprocessSandbox['run']>[2] = {},
) {
  const pooled = prestartPoolOf(sandbox).pids();
  const { durationMs, ...result } = await sandbox.run('/bin/sh', ['-c', script], options);
  expect(durationMs).toBeGreaterThan(0);
  // A taken sandbox leaves the pool at once; a cold run leaves every pooled one in it.
  const warm = pooled.some((pid) => !prestartPoolOf(sandbox).pids().includes(pid));
  return { warm, result };
}

describe('host changes between the pre-start and the run', () => {
  it('a hidden file the host replaced by rename stays hidden (the kernel detached the old mask)', async () => {
    // Under /etc, a system row: the mask is a mount on the host's dentry seen through the bind.
    const dir = tempDir('/etc');
    chmodSync(dir, 0o755);
    const file = join(dir, 'app.conf');
    writeFileSync(file, 'first\n', { mode: 0o644 });
    const sandbox = await warmSandbox({ ...policy, hidePaths: [file] });
    const secret = token();
    // A rotation as editors and secret managers do it: write aside, rename over.
    writeFileSync(`${file}.new`, `${secret}\n`, { mode: 0o644 });
    renameSync(`${file}.new`, file);
    const read = `cat ${file} 2>/dev/null; echo "rc=$?"`;
    const after = await spawnRun(sandbox, '/bin/sh', ['-c', read]);
    // The masked path reads as bwrap's read-only /dev/null bind (nodev: EACCES), never the file.
    expect(after).toMatchObject({ stdout: 'rc=1\n', exit: { exitCode: 0 } });
    // The pool re-keys on the new file: its next sandbox is warm and masks it.
    await ready(sandbox);
    const again = await spawnRun(sandbox, '/bin/sh', ['-c', read]);
    expect(again).toMatchObject({ warm: true, stdout: 'rc=1\n' });
  });

  it('a default mask the host creates after its first run (an install) is applied, warm and cold', async () => {
    // /etc/credstore (systemd credentials) is a default masked row, absent on the test host.
    const path = '/etc/credstore';
    expect(existsSync(path)).toBe(false);
    const sandbox = await warmSandbox();
    mkdirSync(path);
    onTestFinished(() => rmSync(path, { recursive: true, force: true }));
    const secret = token();
    writeFileSync(join(path, 'db.password'), secret, { mode: 0o644 });
    const read = `cat ${path}/db.password 2>/dev/null; echo " rc=$?"`;
    const first = await spawnRun(sandbox, '/bin/sh', ['-c', read]);
    const sync = sandbox.execSync(`/bin/sh -c ${read.replaceAll(' ', '\\ ')}`);
    await ready(sandbox);
    const warm = await spawnRun(sandbox, '/bin/sh', ['-c', read]);
    // An empty read-only tmpfs over it: the file is not there.
    expect([first.stdout, sync.stdout, warm.stdout, warm.warm]).toEqual([
      ' rc=1\n',
      ' rc=1\n',
      ' rc=1\n',
      true,
    ]);
  });

  it('a umask the host tightened after the pre-start is the run’s umask, warm or cold', async () => {
    const sandbox = await warmSandbox();
    const previous = process.umask(0o077);
    onTestFinished(() => {
      process.umask(previous);
    });
    // The first run's key names the new umask: it starts cold; the next is warm under it.
    const first = await spawnRun(sandbox, '/bin/sh', ['-c', 'umask']);
    await ready(sandbox);
    const second = await spawnRun(sandbox, '/bin/sh', ['-c', 'umask']);
    expect([first, second]).toMatchObject([
      { warm: false, stdout: '0077\n' },
      { warm: true, stdout: '0077\n' },
    ]);
  });

  it('so do files a run writes to the host (warm launchers, spawned before the change, too)', async () => {
    const dir = tempDir();
    const sandbox = createSandbox({ ...policy, allowFileWrites: true, restrictToDirectory: dir });
    onTestFinished(() => sandbox.close());
    expect((await sandbox.run('/bin/true')).success).toBe(true); // the launchers are spawned
    const previous = process.umask(0o077);
    onTestFinished(() => {
      process.umask(previous);
    });
    for (const name of ['first', 'second']) {
      expect((await sandbox.run('/bin/sh', ['-c', `echo x > ${name}`])).success).toBe(true);
    }
    expect(sandbox.execSync('/usr/bin/touch third').success).toBe(true); // spawned at the call
    // Owner-only on the host, as the host's umask asks.
    const modes = ['first', 'second', 'third'].map(
      (name) => statSync(join(dir, name)).mode & 0o777,
    );
    expect(modes).toEqual([0o600, 0o600, 0o600]);
  });
});

/** How many network interfaces the host has (the sandbox shares them with the network on). */
const hostInterfaces = readFileSync('/proc/net/dev', 'utf8')
  .split('\n')
  .filter((l) => l.includes(':')).length;

/** Policies and per-call options, and whether the default run's pre-started sandbox serves them. */
const keyRows: {
  name: string;
  policy: PolicyInput;
  options: Parameters<SubprocessSandbox['run']>[2];
  warm: boolean;
  /** The report's line for what the row changes (see `report`). */
  line: [number, string];
}[] = [
  { name: 'defaults', policy, options: {}, warm: true, line: [0, '65534'] },
  {
    name: 'per-call env',
    policy,
    options: { env: { EXTRA: 'a\nb' } },
    warm: true,
    line: [6, 'EXTRA=a'],
  },
  { name: 'cwd in a system row', policy, options: { cwd: '/usr' }, warm: true, line: [1, '/usr'] },
  {
    name: 'per-call openFiles',
    policy,
    options: { rlimits: { openFiles: 64 } },
    warm: false,
    line: [2, '64'],
  },
  // RLIMIT_CPU is not in the key: the stub sets the run's own (prestart-cpu-limit.test.ts).
  { name: 'per-call cpuSecs', policy, options: { cpuSecs: 7 }, warm: true, line: [3, '7'] },
  {
    name: 'per-call maxMemoryMb (tmpfs size)',
    policy,
    options: { maxMemoryMb: 64 },
    warm: false,
    line: [4, '65536'],
  },
  {
    name: 'per-call maxMemoryMb 0 (no memory group)',
    policy,
    options: { maxMemoryMb: 0 },
    warm: false,
    line: [4, '524288'],
  },
  {
    name: 'per-call timeoutMs 0 (no CPU limit)',
    policy,
    options: { timeoutMs: 0 },
    // Whether there is a CPU limit is in the key (the stub sets one or none), not its value.
    warm: false,
    line: [3, 'unlimited'],
  },
  {
    name: 'runAs host',
    policy: { ...policy, runAs: 'host' },
    options: {},
    warm: true,
    line: [0, '0'],
  },
  {
    name: 'runAs other',
    policy: { ...policy, runAs: { uid: 4242, gid: 4243 } },
    options: {},
    warm: true,
    line: [0, '4242'],
  },
  {
    name: 'network on',
    policy: { ...policy, allowNetwork: true },
    options: {},
    warm: true,
    line: [5, String(hostInterfaces)],
  },
  {
    name: 'file writes',
    policy: { ...policy, allowFileWrites: true },
    options: {},
    warm: true,
    line: [5, '1'],
  },
];

/** id, cwd, RLIMIT_NOFILE, RLIMIT_CPU, /tmp's size in KiB, network namespace, then the env. */
const report = [
  'id -u',
  'pwd',
  'ulimit -n',
  'ulimit -t',
  "df -k /tmp | awk 'NR==2 {print $2}'",
  // Interfaces: loopback alone in a namespace of its own; the host's when shared.
  'grep -c : /proc/net/dev',
  'env | sort',
].join('; ');

describe('a sandbox dropped without close()', () => {
  it('has its pre-started sandboxes ended once it is collected', () => {
    // A host that makes a sandbox per request and never closes it; run with --expose-gc.
    const script = `
      import { readFileSync } from 'node:fs';
      import { createSandbox } from './src/index.ts';
      import { prestartPoolOf } from './src/linux/prestart-pool.ts';
      const running = (pid) => { try { return !/^[ZX]/.test(readFileSync('/proc/' + pid + '/stat', 'utf8').split(') ')[1]); } catch { return false; } };
      async function request() {
        const sandbox = createSandbox({ allowNetwork: false, allowFileWrites: false });
        await sandbox.run('/bin/true');
        await new Promise((resolve) => setImmediate(resolve));
        await prestartPoolOf(sandbox).settled();
        return prestartPoolOf(sandbox).pids();
      }
      const pooled = [...(await request()), ...(await request())];
      for (let round = 0; round < 50 && pooled.some(running); round++) {
        globalThis.gc();
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      process.stdout.write(JSON.stringify({ pooled: pooled.length, left: pooled.filter(running) }));
      process.exit(0);`;
    const result = spawnSync(
      node,
      ['--expose-gc', '--conditions=@coda/source', '--input-type=module', '-e', script],
      { cwd: join(import.meta.dirname, '..'), encoding: 'utf8', timeout: 20_000 },
    );
    expect(JSON.parse(result.stdout)).toEqual({ pooled: 4, left: [] });
  });
});

describe('the pool key, field by field, against a cold twin', () => {
  it.each(keyRows)('$name: warm=$warm, and its result equals the cold run’s', async (row) => {
    const sandbox = await warmSandbox(row.policy);
    const cold = await coldTwin(row.policy);
    const warmRun = await runResult(sandbox, report, row.options);
    const coldRun = await runResult(cold, report, row.options);
    expect([warmRun.warm, coldRun.warm]).toEqual([row.warm, false]);
    expect(warmRun.result.success).toBe(true);
    expect(warmRun.result.stdout.split('\n')[row.line[0]]).toBe(row.line[1]);
    // Every field: code, output, controls, sandboxApplied, confinement, limits, truncation.
    expect(warmRun.result).toEqual(coldRun.result);
  });
});

describe('the stub’s pipe protocol', () => {
  it('argv and environment with odd bytes arrive whole, in a message of many reads', async () => {
    const sandbox = await warmSandbox();
    const argv = [
      '',
      '-n',
      '--',
      'a\nb',
      'q\'uo"te',
      '$(id) `id` $' + '{HOME}', // shell syntax, literal
      '\t \r',
      'é\u{1F600}',
      'x'.repeat(20_000),
    ];
    const env = {
      NEWLINES: 'one\ntwo\n',
      EMPTY: '',
      EQUALS: '=a=b=',
      // A value that looks like the next protocol field, and one like a count.
      FIELD: 'PATH=/evil',
      COUNT: '99',
      BIG: 'y'.repeat(20_000),
    };
    // Prints each argument and each asked-for variable as JSON (python3 is in the view's /usr).
    const script = `import json, os, sys; print(json.dumps({"argv": sys.argv[1:], "env": {k: os.environ.get(k) for k in ${JSON.stringify(Object.keys(env))}}}), end="")`;
    const run = await spawnRun(sandbox, python, ['-c', script, ...argv], { env });
    expect(run.warm).toBe(true);
    expect(run.exit).toMatchObject({ exitCode: 0 });
    expect(JSON.parse(run.stdout)).toEqual({ argv, env });
  });

  /** Variables bash sets or reads itself, as a caller might pass them; each with one it keeps. */
  const bashNames: Record<string, string>[] = [
    { UID: '7' },
    { SHLVL: '5' },
    { OLDPWD: '/usr' },
    { GROUPS: 'staff' },
    { PS1: 'prompt' },
    { BASH_ENV: '/nonexistent' },
    { POSIXLY_CORRECT: 'y', EUID: '3' },
  ];
  it.each([
    { identity: 'dropped', runAs: undefined },
    { identity: 'host', runAs: 'host' as const },
  ])(
    'variables bash treats as its own are served warm and arrive as passed, as cold ($identity identity)',
    async ({ runAs }) => {
      const input = { ...policy, runAs };
      const sandbox = await warmSandbox(input);
      const cold = await coldTwin(input);
      const seen: unknown[] = [];
      for (const env of bashNames) {
        await ready(sandbox);
        const script = Object.keys(env)
          .map((name) => `printf '%s=%s;' ${name} "\${${name}-unset}"`)
          .join('; ');
        const warmRun = await runResult(sandbox, script, { env: { ...env, KEPT: 'k' } });
        const coldRun = await runResult(cold, script, { env: { ...env, KEPT: 'k' } });
        expect(warmRun.result).toEqual(coldRun.result);
        seen.push([warmRun.warm, warmRun.result.stdout, warmRun.result.stderr]);
      }
      // env sets the command's environment (src/linux/exact-environment.ts), not bash.
      expect(seen).toEqual(
        bashNames.map((env) => [
          true,
          Object.entries(env)
            .map(([name, value]) => `${name}=${value};`)
            .join(''),
          '',
        ]),
      );
    },
  );

  /** One variable: well within exec's limit, past what a pre-started sandbox takes, past the kernel's. */
  const sizes = [
    { bytes: 40_000, warm: true, code: 'RUNTIME' },
    { bytes: 80_000, warm: false, code: 'RUNTIME' },
    { bytes: 140_000, warm: false, code: 'UNAVAILABLE' },
  ];
  it.each(sizes)('a $bytes-byte variable: warm=$warm, $code, as a cold run says', async (row) => {
    const sandbox = await warmSandbox();
    const cold = await coldTwin();
    const env = { HUGE: 'h'.repeat(row.bytes) };
    const warmRun = await runResult(sandbox, 'exit 3', { env });
    const coldRun = await runResult(cold, 'exit 3', { env });
    expect([warmRun.warm, coldRun.warm]).toEqual([row.warm, false]);
    expect(warmRun.result.code).toBe(row.code);
    expect(warmRun.result).toEqual(coldRun.result);
  });

  it('the command cannot read or write the command pipe or the start descriptor', async () => {
    const sandbox = await warmSandbox();
    const run = await spawnRun(sandbox, '/bin/sh', [
      '-c',
      'for fd in 4 5 6 7; do (echo x >&$fd) 2>/dev/null && echo "w$fd"; (cat <&$fd) 2>/dev/null && echo "r$fd"; done; echo done',
    ]);
    expect(run).toMatchObject({ warm: true, stdout: 'done\n', exit: { exitCode: 0 } });
  });
});

describe('state a pre-started sandbox carries into its run (held)', () => {
  it('fresh signals, session and address space; no stub variable or argument left', async () => {
    const sandbox = await warmSandbox();
    const script = [
      'grep -E "^(SigPnd|ShdPnd|SigBlk|SigIgn):" /proc/self/status',
      // Session and group of its own (bwrap --new-session), no controlling terminal.
      'ps -o sid= -o pgid= -o tty= -p $$ | tr -s " "',
      'tr "\\0" " " < /proc/self/cmdline; echo',
      'grep -c CODA_SANDBOX /proc/self/environ',
      'grep "\\[stack\\]" /proc/self/maps | cut -d- -f1',
    ].join('; ');
    const runs = [];
    for (let index = 0; index < 2; index++) {
      await ready(sandbox);
      runs.push(await spawnRun(sandbox, '/bin/sh', ['-c', script]));
    }
    expect(runs.map((run) => run.warm)).toEqual([true, true]);
    const lines = runs.map((run) => run.stdout.split('\n'));
    for (const output of lines) {
      expect(output.slice(0, 7)).toEqual([
        'SigPnd:\t0000000000000000',
        'ShdPnd:\t0000000000000000',
        'SigBlk:\t0000000000000000',
        'SigIgn:\t0000000000000000',
        ' 1 1 ?',
        `${realpathSync('/bin/sh')} -c ${script} `,
        '0',
      ]);
    }
    // Each run is a fresh exec: its stack is placed anew (ASLR), nothing shared with the stub.
    expect(lines[0]![7]).toMatch(/^[0-9a-f]+$/);
    expect(lines[0]![7]).not.toBe(lines[1]![7]);
  });

  it('a pre-aborted signal starts nothing, warm as cold', async () => {
    const sandbox = await warmSandbox();
    const cold = await coldTwin();
    const outcomes: string[] = [];
    for (let index = 0; index < 4; index++) {
      await ready(sandbox);
      for (const [name, box] of [
        ['warm', sandbox],
        ['cold', cold],
      ] as const) {
        const pooled = prestartPoolOf(box).pids();
        const result = await box.run('/bin/echo', ['ran'], { signal: AbortSignal.abort() });
        const taken = pooled.some((pid) => !prestartPoolOf(box).pids().includes(pid));
        // The command never ran: no output, even from a sandbox that was waiting for it.
        outcomes.push(`${name}:${taken}:${result.code}:${result.stdout}`);
      }
    }
    expect(outcomes).toEqual(
      Array.from({ length: 4 }, () => ['warm:true:CANCELLED:', 'cold:false:CANCELLED:']).flat(),
    );
  });

  it('a sandbox whose stub was killed a moment ago is not handed out: the run starts cold', async () => {
    const sandbox = await warmSandbox();
    const wrappers = prestartPoolOf(sandbox).pids();
    // The innermost process below each wrapper (wrapper, bwrap, its pid 1, the stub).
    const stubs = wrappers.map((wrapper) => {
      let pid = wrapper;
      for (let below = childrenOf(pid); below.length > 0; below = childrenOf(pid)) pid = below[0]!;
      return pid;
    });
    expect(stubs.every((stub, index) => stub !== wrappers[index])).toBe(true);
    for (const stub of stubs) process.kill(stub, 'SIGKILL');
    // Blocks the event loop until the stubs are dead (zombies, or reaped by bwrap's pid 1), then
    // runs at once: their wrappers still run for a few milliseconds (bwrap has yet to notice).
    const deadline = Date.now() + 5_000;
    while (stubs.some(isRunning) && Date.now() < deadline) {
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 0.1);
    }
    expect(stubs.filter(isRunning)).toEqual([]);
    const result = await sandbox.run('/bin/echo', ['hi']);
    expect(result).toMatchObject({ success: true, stdout: 'hi\n' });
  });

  it('runs started at once each get their own sandbox, warm or cold, all confined alike', async () => {
    const sandbox = await warmSandbox();
    const runs = await Promise.all(
      Array.from({ length: 6 }, (_, index) =>
        spawnRun(sandbox, '/bin/sh', ['-c', `echo ${index} $(id -u) $$; ls -A /tmp | wc -l`]),
      ),
    );
    expect(runs.map((run) => run.stdout)).toEqual(
      Array.from({ length: 6 }, (_, index) => `${index} 65534 2\n0\n`),
    );
    // Two were pre-started (two per key); the rest started cold.
    expect(runs.filter((run) => run.warm).length).toBe(2);
  });
});

/** Live (not zombie) children of `parent`, from a scan of /proc. */
function childrenOf(parent: number): number[] {
  const found: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (fields[0] !== 'Z' && Number(fields[1]) === parent) found.push(Number(entry));
    } catch {
      // Gone while we looked.
    }
  }
  return found;
}

/** Whether `pid` is a live process (not a zombie). */
function isRunning(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return !/^[ZX]/.test(stat.slice(stat.lastIndexOf(')') + 2));
  } catch {
    return false;
  }
}
