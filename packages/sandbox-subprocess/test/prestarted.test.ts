// Pre-started sandboxes: a run that finds one ready for its exact confinement skips bubblewrap's
// set-up. It must be confined exactly as a cold run (identity, capabilities, seccomp, view, fds,
// environment, rlimits, cgroups, controls), use each pre-started sandbox once, hand the
// environment over only after the identity dropped, and leave nothing behind.
import { spawn, spawnSync } from 'node:child_process';
import { closeSync, existsSync, openSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import { createSandbox, type SubprocessSandbox } from '../src/index.ts';
import { detectCgroups } from '../src/linux/cgroup.ts';
import { prestartPoolOf } from '../src/linux/prestart-pool.ts';
import { collectSpawned, node, sandboxDir, tempDir, token } from './support/helpers.ts';

const policy = { allowNetwork: false, allowFileWrites: false, timeoutMs: 20_000 } as const;

/** A sandbox closed after the test, whose pool has a ready sandbox for `/bin/true`-like runs. */
async function warmSandbox(input: Parameters<typeof createSandbox>[0] = policy) {
  const sandbox = createSandbox(input);
  onTestFinished(() => sandbox.close());
  const pool = prestartPoolOf(sandbox);
  const first = await sandbox.run('/bin/true');
  expect(first.success).toBe(true);
  await readyIn(sandbox);
  return { sandbox, pool };
}

/** Waits until the sandbox's pool holds a ready sandbox (refills start after a run's exit). */
async function readyIn(sandbox: SubprocessSandbox): Promise<number[]> {
  const pool = prestartPoolOf(sandbox);
  await new Promise((resolve) => setImmediate(resolve));
  await pool.settled();
  expect(pool.pids().length).toBeGreaterThan(0);
  return pool.pids();
}

/** Runs `args` under /bin/sh and says whether the run came from the pool. */
async function runSh(sandbox: SubprocessSandbox, script: string, env?: Record<string, string>) {
  const pooled = prestartPoolOf(sandbox).pids();
  const child = sandbox.spawn('/bin/sh', ['-c', script], env === undefined ? {} : { env });
  child.stdin.end();
  const { stdout, exit } = await collectSpawned(child);
  return { warm: pooled.includes(child.pid!), stdout, exit, controls: child.controls };
}

/** What a confined command reports about itself (cgroup paths vary by run: only their shape). */
const selfReport = [
  'id -u; id -g; id -G',
  'grep -E "^(CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs|Seccomp):" /proc/self/status',
  'ls /proc/self/fd | sort -n | tr "\\n" " "; echo',
  'env -0 | sort -z | tr "\\0" "\\n"',
  'pwd',
  'ulimit -t; ulimit -c; ulimit -n; ulimit -s',
  'ls -A / | tr "\\n" " "; echo',
  'echo "shadow=$(cat /etc/shadow 2>/dev/null | wc -c) ssh=$(ls -A /etc/ssh | wc -l)"',
  'touch /tmp/x 2>/dev/null && echo tmp-writable || echo tmp-read-only',
  'sed -E "s/run-[0-9]+/run-N/" /proc/self/cgroup | grep -E ":(memory|pids):" | sort -t: -k2',
].join('; ');

/** The same report's expected lines on this host (root, cgroup v1, the default policy). */
const expectedReport = (value: string): unknown[] => [
  '65534',
  '65534',
  '65534',
  'CapInh:\t0000000000000000',
  'CapPrm:\t0000000000000000',
  'CapEff:\t0000000000000000',
  'CapBnd:\t0000000000000000',
  'CapAmb:\t0000000000000000',
  'NoNewPrivs:\t1',
  'Seccomp:\t2',
  // 0-2 and ls's own descriptor for /proc/self/fd: no pipe of the wrapper, stub or bwrap.
  '0 1 2 3 ',
  'HOME=/home/sandbox',
  'LANG=C.UTF-8',
  ...`MULTI=${value}`.split('\n'),
  `PATH=${process.env.PATH}`,
  'PWD=/home/sandbox',
  'SHLVL=0',
  'TERM=xterm',
  '/home/sandbox',
  // RLIMIT_CPU from timeoutMs (20 s), no core files, the policy's openFiles and stack.
  '20',
  '0',
  '1024',
  '8192',
  // The view's rows that exist on this host, nothing else.
  `bin dev etc home lib ${existsSync('/lib32') ? 'lib32 ' : ''}lib64 proc sbin tmp usr `,
  // /etc/shadow is /dev/null; /etc/ssh is an empty directory.
  'shadow=0 ssh=0',
  'tmp-read-only',
  expect.stringMatching(/^\d+:memory:\/.*coda-sandbox-\d+\/run-N$/),
  expect.stringMatching(/^\d+:pids:\/coda-sandbox-\d+\/run-N$/),
  '',
];

describe('a run from a pre-started sandbox', () => {
  it('is confined exactly as a cold run: identity, capabilities, seccomp, fds, env, view, limits', async () => {
    const value = `multi\nline = 'quoted' "$HOME" \`x\` é ${token()}`;
    const sandbox = createSandbox({ ...policy, env: { MULTI: value } });
    onTestFinished(() => sandbox.close());
    // The pool is closed for the cold twin: every one of its runs starts cold.
    const cold = createSandbox({ ...policy, env: { MULTI: value } });
    await prestartPoolOf(cold).close();
    await sandbox.run('/bin/true');
    await readyIn(sandbox);
    const warmRun = await runSh(sandbox, selfReport);
    const coldRun = await runSh(cold, selfReport);
    expect([warmRun.warm, coldRun.warm]).toEqual([true, false]);
    for (const run of [warmRun, coldRun]) {
      expect(run.exit).toMatchObject({ exitCode: 0, timedOut: false });
      expect(run.stdout.split('\n')).toEqual(expectedReport(value));
    }
    expect(warmRun.stdout).toBe(coldRun.stdout);
    expect(warmRun.controls).toEqual(coldRun.controls);
  });

  it('gets its own fresh groups, with exactly the run’s limits, while it runs', async () => {
    // Pre-started with placeholder limits; the run's are written when it takes the sandbox.
    const { sandbox } = await warmSandbox({
      ...policy,
      maxMemoryMb: 300,
      rlimits: { processes: 50 },
    });
    const support = detectCgroups();
    const pooled = prestartPoolOf(sandbox).pids();
    const child = sandbox.spawn('/bin/sh', ['-c', 'cat /proc/self/cgroup; read line']);
    expect(pooled).toContain(child.pid);
    let out = '';
    child.stdout.on('data', (chunk) => {
      out += chunk;
    });
    await expect.poll(() => out.includes(':pids:'), { timeout: 10_000 }).toBe(true);
    const group = (controller: string): string =>
      /^\d+:(\w+):(.*)$/m.exec(
        out.split('\n').find((line) => line.includes(`:${controller}:`))!,
      )![2]!;
    const memoryDir = join(support.memory!.base, '..', ...group('memory').split('/').slice(-2));
    const pidsDir = join(support.pids!.base, '..', ...group('pids').split('/').slice(-2));
    expect(readFileSync(join(memoryDir, 'memory.limit_in_bytes'), 'utf8').trim()).toBe(
      String(300 * 1024 * 1024),
    );
    expect(readFileSync(join(pidsDir, 'pids.max'), 'utf8').trim()).toBe('50');
    // The wrapper stays outside the groups: they hold exactly bwrap, its pid 1 and the command.
    // (Polled: `cat` may not have exited yet when its output arrives.)
    await expect
      .poll(() => readFileSync(join(pidsDir, 'cgroup.procs'), 'utf8').trim().split('\n').length)
      .toBe(3);
    expect(readFileSync(join(pidsDir, 'cgroup.procs'), 'utf8')).not.toContain(`${child.pid}\n`);
    child.stdin.end('\n');
    expect(await child.exited).toMatchObject({ exitCode: 0 });
    await expect.poll(() => [existsSync(memoryDir), existsSync(pidsDir)]).toEqual([false, false]);
  });

  it('hands the environment over only after the identity dropped, never on a command line', async () => {
    const { sandbox } = await warmSandbox();
    const secret = token();
    const support = detectCgroups();
    const pooled = prestartPoolOf(sandbox).pids();
    const child = sandbox.spawn('/bin/sh', ['-c', 'cat /proc/self/cgroup; read line'], {
      env: { LD_PRELOAD: `/nonexistent/${secret}.so`, SECRET: secret },
    });
    expect(pooled).toContain(child.pid);
    let out = '';
    child.stdout.on('data', (chunk) => {
      out += chunk;
    });
    child.stderr.resume();
    await expect.poll(() => out.includes(':pids:'), { timeout: 10_000 }).toBe(true);
    const pidsGroup = /:pids:(.*)$/m.exec(out)![1]!;
    const procs = readFileSync(
      join(support.pids!.base, '..', ...pidsGroup.split('/').slice(-2), 'cgroup.procs'),
      'utf8',
    )
      .trim()
      .split('\n')
      .map(Number);
    const seen = [child.pid!, ...procs].map((pid) => {
      const status = readFileSync(`/proc/${pid}/status`, 'utf8');
      return {
        privileged: /^CapEff:\s+0*[1-9a-f]/m.test(status),
        cmdline: readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(secret),
        environ: readFileSync(`/proc/${pid}/environ`, 'utf8').includes(secret),
      };
    });
    // No command line holds the secret; only the unprivileged command's environment does.
    expect(seen.map((process) => process.cmdline)).toEqual([false, false, false, false]);
    expect(seen.filter((process) => process.environ)).toEqual([
      { privileged: false, cmdline: false, environ: true },
    ]);
    child.stdin.end('\n');
    expect(await child.exited).toMatchObject({ exitCode: 0 });
  });

  it('serves one run only: fresh namespaces and tmpfs, nothing left by the run before', async () => {
    const { sandbox } = await warmSandbox({ ...policy, allowFileWrites: true });
    const first = await runSh(
      sandbox,
      'echo left > /tmp/left; echo $$ > /home/sandbox/pid; ls -A /tmp /home/sandbox | tr "\\n" " "',
    );
    expect(first).toMatchObject({ warm: true, stdout: '/home/sandbox: pid  /tmp: left ' });
    await readyIn(sandbox);
    const second = await runSh(
      sandbox,
      'ls -A /tmp /home/sandbox | tr "\\n" " "; set -- /proc/[0-9]*; echo "$@"',
    );
    expect(second.warm).toBe(true);
    // Empty /tmp and home; its pid namespace holds only its pid 1 and sh (the glob is sh's own).
    expect(second.stdout).toBe('/home/sandbox:  /tmp: /proc/1 /proc/2\n');
  });

  it('never hands a pre-started sandbox out twice', async () => {
    const { sandbox } = await warmSandbox();
    const used: number[] = [];
    for (let run = 0; run < 4; run++) {
      await readyIn(sandbox);
      const pooled = prestartPoolOf(sandbox).pids();
      const child = sandbox.spawn('/bin/true');
      child.stdin.end();
      expect(pooled).toContain(child.pid);
      expect(prestartPoolOf(sandbox).pids()).not.toContain(child.pid);
      used.push(child.pid!);
      expect(await child.exited).toMatchObject({ exitCode: 0 });
    }
    expect(new Set(used).size).toBe(4);
  });

  it('times out and is killed like a cold run, with nothing left running', async () => {
    const { sandbox } = await warmSandbox({ ...policy, timeoutMs: 1_000 });
    const pooled = prestartPoolOf(sandbox).pids();
    const child = sandbox.spawn('/bin/sh', ['-c', 'sleep 30 & sleep 30']);
    child.stdin.end();
    expect(pooled).toContain(child.pid);
    const processes = tree(child.pid!);
    await expect.poll(() => tree(child.pid!).length, { timeout: 5_000 }).toBe(6);
    const exit = await child.exited;
    expect(exit).toMatchObject({ timedOut: true, exitCode: null, signal: 'SIGKILL' });
    const all = [...new Set([...processes, ...tree(child.pid!)])];
    await expect.poll(() => all.filter((pid) => tree(pid).length > 0)).toEqual([]);
  });

  it('does not serve a run whose confinement differs (a per-call openFiles): that one starts cold', async () => {
    const { sandbox } = await warmSandbox();
    const pooled = prestartPoolOf(sandbox).pids();
    const child = sandbox.spawn('/bin/sh', ['-c', 'ulimit -n'], { rlimits: { openFiles: 64 } });
    let out = '';
    child.stdout.on('data', (chunk) => {
      out += chunk;
    });
    child.stdin.end();
    expect(pooled).not.toContain(child.pid);
    expect(await child.exited).toMatchObject({ exitCode: 0 });
    expect(out).toBe('64\n');
    expect(prestartPoolOf(sandbox).pids()).toEqual(expect.arrayContaining(pooled));
  });

  it('serves a run whose per-call timeoutMs differs, with that run’s own CPU limit', async () => {
    // RLIMIT_CPU is not in the key: the stub sets the run's (test/prestart-cpu-limit.test.ts).
    const { sandbox } = await warmSandbox();
    const pooled = prestartPoolOf(sandbox).pids();
    const child = sandbox.spawn('/bin/sh', ['-c', 'ulimit -t'], { timeoutMs: 5_000 });
    let out = '';
    child.stdout.on('data', (chunk) => {
      out += chunk;
    });
    child.stdin.end();
    expect(pooled).toContain(child.pid);
    expect(await child.exited).toMatchObject({ exitCode: 0 });
    expect(out).toBe('5\n');
  });
});

describe('inherited host descriptors, warm', () => {
  it('a non-CLOEXEC fd the host holds when the pool fills never reaches a pooled run', async () => {
    const dir = tempDir();
    const secret = join(dir, 'secret.txt');
    writeFileSync(secret, 'the secret\n');
    const target = sandboxDir(join(dir, 'hostdir'));
    const hostScript = `
      const { createSandbox } = await import(${JSON.stringify(join(import.meta.dirname, '../src/index.ts'))});
      const { prestartPoolOf } = await import(${JSON.stringify(join(import.meta.dirname, '../src/linux/prestart-pool.ts'))});
      const sandbox = createSandbox({ allowNetwork: false, allowFileWrites: false });
      await sandbox.run('/bin/true');
      await new Promise((resolve) => setImmediate(resolve));
      await prestartPoolOf(sandbox).settled();
      const pooled = prestartPoolOf(sandbox).pids();
      const child = sandbox.spawn('/bin/sh', ['-c',
        'ls /proc/self/fd | sort -n | tr "\\\\n" " "; for n in 30 200; do cat /proc/self/fd/$n 2>/dev/null; echo x > /proc/self/fd/$n/planted 2>/dev/null && echo planted; done; true']);
      let out = '';
      child.stdout.on('data', (chunk) => { out += chunk; });
      child.stdin.end();
      await child.exited;
      await sandbox.close();
      process.stdout.write(JSON.stringify({ warm: pooled.includes(child.pid), out }));`;
    const secretFd = openSync(secret, 'r');
    const dirFd = openSync(target, 'r');
    const child = spawn(
      node,
      ['--conditions=@coda/source', '--input-type=module', '-e', hostScript],
      {
        // Far above the wrapper's own pipes, which would overwrite low ones and hide a missing close.
        stdio: Array.from({ length: 201 }, (_, fd) =>
          fd === 1
            ? 'pipe'
            : fd === 2
              ? 'inherit'
              : fd === 30
                ? secretFd
                : fd === 200
                  ? dirFd
                  : 'ignore',
        ),
      },
    );
    closeSync(secretFd);
    closeSync(dirFd);
    let out = '';
    child.stdout!.on('data', (chunk) => {
      out += chunk;
    });
    await new Promise((resolve) => child.once('exit', resolve));
    expect(JSON.parse(out)).toEqual({ warm: true, out: '0 1 2 3 ' });
    expect(existsSync(join(target, 'planted'))).toBe(false);
  });
});

/** Every process whose parent chain leads to `root` (not zombies), `root` included. */
function tree(root: number): number[] {
  const parents = new Map<number, number>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (fields[0] !== 'Z') parents.set(Number(entry), Number(fields[1]));
    } catch {
      // Gone while we looked.
    }
  }
  const found = parents.has(root) ? [root] : [];
  for (let added = true; added; ) {
    added = false;
    for (const [pid, parent] of parents) {
      if (found.includes(parent) && !found.includes(pid)) {
        found.push(pid);
        added = true;
      }
    }
  }
  return found;
}

describe('the pool', () => {
  it('close() ends every pre-started sandbox: no process and no group left', async () => {
    const { sandbox, pool } = await warmSandbox();
    const wrappers = pool.pids();
    const processes = wrappers.flatMap(tree);
    // The wrapper, bwrap, bwrap's pid 1 and the stub, for each.
    expect(processes.length).toBe(wrappers.length * 4);
    const groups = processes.map((pid) => readFileSync(`/proc/${pid}/cgroup`, 'utf8'));
    const runGroups = [...new Set(groups.join('\n').match(/run-\d+/g))];
    expect(runGroups.length).toBe(wrappers.length);
    await sandbox.close();
    expect(processes.filter((pid) => tree(pid).length > 0)).toEqual([]);
    const support = detectCgroups();
    const left = [support.memory!.base, support.pids!.base].flatMap((base) =>
      runGroups.filter((name) => existsSync(join(base, name))),
    );
    expect(left).toEqual([]);
    expect(pool.pids()).toEqual([]);
    expect(await sandbox.run('/bin/true')).toMatchObject({ success: false, code: 'UNAVAILABLE' });
  });

  it('a pre-started sandbox killed while pooled is not used; run() still succeeds', async () => {
    const { sandbox, pool } = await warmSandbox();
    const victims = pool.pids();
    for (const pid of victims) process.kill(pid, 'SIGKILL');
    await expect.poll(() => pool.pids().filter((pid) => victims.includes(pid))).toEqual([]);
    const run = await runSh(sandbox, 'id -u');
    expect(run).toMatchObject({ stdout: '65534\n', exit: { exitCode: 0 } });
  });

  it('nor one that died a moment ago, before Node noticed (a zombie not yet reaped)', async () => {
    const { sandbox, pool } = await warmSandbox();
    const [victim] = pool.pids();
    process.kill(victim!, 'SIGKILL');
    // Blocks the event loop until the kernel has made it a zombie: Node cannot reap it meanwhile.
    const state = (): string => {
      const stat = readFileSync(`/proc/${victim}/stat`, 'utf8');
      return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
    };
    const deadline = Date.now() + 5_000;
    while (state() !== 'Z' && Date.now() < deadline) {
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 1);
    }
    expect(state()).toBe('Z');
    expect(pool.pids()).toContain(victim);
    const child = sandbox.spawn('/bin/sh', ['-c', 'id -u']);
    expect(child.pid).not.toBe(victim);
    let out = '';
    child.stdout.on('data', (chunk) => {
      out += chunk;
    });
    child.stdin.end();
    expect(await child.exited).toMatchObject({ exitCode: 0 });
    expect(out).toBe('65534\n');
  });

  it('pre-starts that keep failing stop being retried, and every run still succeeds cold', async () => {
    const sandbox = createSandbox(policy);
    onTestFinished(() => sandbox.close());
    const pool = prestartPoolOf(sandbox);
    const killed = new Set<number>();
    for (let round = 0; round < 5; round++) {
      const run = await runSh(sandbox, 'id -u');
      expect(run).toMatchObject({ warm: false, stdout: '65534\n', exit: { exitCode: 0 } });
      // Each refill's sandbox dies before it says it is ready.
      const deadline = Date.now() + 2_000;
      while (Date.now() < deadline) {
        const fresh = pool.pids().filter((pid) => !killed.has(pid));
        for (const pid of fresh) {
          process.kill(pid, 'SIGKILL');
          killed.add(pid);
        }
        await new Promise((resolve) => setTimeout(resolve, 1));
      }
    }
    // Three failures in a row: the key is no longer pre-started.
    expect(killed.size).toBe(3);
    await pool.settled();
    expect(pool.pids()).toEqual([]);
  });
});

describe('a host killed by a signal with sandboxes pre-started', () => {
  it('leaves no group behind: each wrapper, orphaned, removes its groups', async () => {
    const script = [
      "import { createSandbox } from './src/index.ts';",
      "import { prestartPoolOf } from './src/linux/prestart-pool.ts';",
      'const sandbox = createSandbox({ timeoutMs: 10_000 });',
      "await sandbox.run('/bin/true');",
      'await new Promise((resolve) => setImmediate(resolve));',
      'await prestartPoolOf(sandbox).settled();',
      'console.log(process.pid, prestartPoolOf(sandbox).pids().length);',
      "process.kill(process.pid, 'SIGKILL');",
    ].join('\n');
    const result = spawnSync(
      node,
      ['--conditions=@coda/source', '--input-type=module', '-e', script],
      {
        cwd: join(import.meta.dirname, '..'),
        encoding: 'utf8',
        timeout: 20_000,
      },
    );
    expect(result.signal).toBe('SIGKILL');
    const [pid, pooled] = result.stdout.trim().split(' ');
    expect(Number(pooled)).toBeGreaterThan(0);
    const support = detectCgroups();
    const bases = [support.memory, support.pids].map((hierarchy) =>
      join(hierarchy!.base, '..', `coda-sandbox-${pid}`),
    );
    const runGroups = (): string[] =>
      bases.flatMap((base) =>
        existsSync(base) ? readdirSync(base).filter((name) => name.startsWith('run-')) : [],
      );
    await expect.poll(runGroups, { timeout: 10_000 }).toEqual([]);
  });
});
