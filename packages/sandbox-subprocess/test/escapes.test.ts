// Published sandbox and container escapes (bubblewrap, flatpak, runc, sandbox-runtime, Codex),
// one test per class, each on the real kernel with real bubblewrap and the default policy
// unless it says otherwise. The host runs as root, the usual case inside a container.
import { spawn } from 'node:child_process';
import {
  chmodSync,
  closeSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { createRequire } from 'node:module';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { version as esbuildVersion } from 'esbuild';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { createSandbox, SandboxControl } from '../src/index.ts';
import { type CheckedPath, releasePins } from '../src/linux/checked-path.ts';
import { defaultFilesystemView } from '../src/linux/filesystem-view.ts';
import { bwrapArguments, runIdentity } from '../src/linux/linux-plan.ts';
import { resolveSubprocessPolicy } from '../src/policy/subprocess-policy.ts';
import { shellQuote } from '../src/process/shell-quote.ts';
import { prepareLaunch, releasePlan } from '../src/process/spawn-confined.ts';
import { node, python, sandboxDir, tempDir } from './support/helpers.ts';

const defaults = { allowNetwork: false, allowFileWrites: false } as const;
const sh = (script: string) => createSandbox(defaults).run('/bin/sh', ['-c', script]);

describe('host kernel settings (uid 0 needs no capability to write /proc/sys)', () => {
  it.each(['/proc/sys/kernel/core_pattern', '/proc/sys/kernel/panic', '/proc/sys/fs/file-max'])(
    'cannot open %s for writing',
    async (path) => {
      const before = readFileSync(path, 'utf8');
      const result = await createSandbox(defaults).run(python, [
        '-c',
        `import os\ntry:\n os.open("${path}", os.O_WRONLY); print("opened")\nexcept OSError as e: print(e.errno)`,
      ]);
      // EACCES (13): the identity is not root. With the host's uid 0 (runAs: 'host'), the view
      // alone holds: EROFS (30), /proc/sys is read-only.
      expect(result.stdout).toBe('13\n');
      const asRoot = await createSandbox({ ...defaults, runAs: 'host' }).run(python, [
        '-c',
        `import os\ntry:\n os.open("${path}", os.O_WRONLY); print("opened")\nexcept OSError as e: print(e.errno)`,
      ]);
      expect(asRoot.stdout).toBe('30\n');
      expect(readFileSync(path, 'utf8')).toBe(before);
    },
  );

  it('runs commands as nobody on a root host, with no capability left', async () => {
    const result = await sh(
      'id -u; id -g; id -G; grep -E "^Cap(Prm|Eff|Bnd|Amb|Inh):" /proc/self/status',
    );
    expect(result.stdout).toBe(
      '65534\n65534\n65534\nCapInh:\t0000000000000000\nCapPrm:\t0000000000000000\nCapEff:\t0000000000000000\nCapBnd:\t0000000000000000\nCapAmb:\t0000000000000000\n',
    );
    expect(result.controls).toContain(SandboxControl.unprivilegedIdentity);
  });

  it('masks /proc files that leak kernel state, and /sys is absent', async () => {
    const result = await sh(
      'cat /proc/keys /proc/timer_list /proc/kallsyms 2>/dev/null | wc -c; ls /proc/acpi | wc -l; ls /sys 2>&1 >/dev/null | wc -l',
    );
    expect(result.stdout).toBe('0\n0\n1\n');
  });
});

describe("host-side helpers never take the caller's environment", () => {
  it('LD_PRELOAD and LD_DEBUG_OUTPUT reach only the command, after bwrap and setpriv', async () => {
    const dir = tempDir();
    const marker = join(dir, 'ld-debug');
    // LD_DEBUG_OUTPUT would make ld.so write a file in every host-side program it starts.
    const result = await createSandbox({ ...defaults, restrictToDirectory: dir }).run(
      '/bin/sh',
      ['-c', 'echo "$LD_PRELOAD|$LD_DEBUG"'],
      {
        env: {
          LD_PRELOAD: '/nonexistent/evil.so',
          LD_DEBUG: 'statistics',
          LD_DEBUG_OUTPUT: marker,
        },
      },
    );
    // The command's own ld.so reports its statistics (it cannot write the read-only marker).
    expect(result.stdout.split('\n').at(-2)).toBe('/nonexistent/evil.so|statistics');
    // Only the sandboxed sh (and echo) wrote debug output, inside the view, nowhere on the host.
    expect(readdirSync(dir)).toEqual([]);
    expect(result.controls).toContain(SandboxControl.cleanHelpers);
  });
});

describe('host Unix sockets with the network off', () => {
  let server: Server;
  let socketPath = '';
  let connections = 0;
  beforeAll(async () => {
    const dir = join('/var/tmp', `coda-socket-${process.pid}`);
    mkdirSync(dir, { recursive: true });
    socketPath = join(dir, 'daemon.sock');
    rmSync(socketPath, { force: true });
    server = createServer((socket) => {
      connections++;
      socket.end('hello\n');
    });
    await new Promise<void>((resolve) => server.listen(socketPath, resolve));
    chmodSync(socketPath, 0o777); // connecting needs write permission for the sandbox identity
  });
  afterAll(async () => {
    await new Promise<void>((resolve) => server.close(() => resolve()));
    rmSync(join('/var/tmp', `coda-socket-${process.pid}`), { recursive: true, force: true });
  });

  const connect = (path: string): string[] => [
    '-c',
    `import socket\ns = socket.socket(socket.AF_UNIX)\ntry:\n s.connect("${path}"); print("connected", s.recv(6))\nexcept OSError as e: print("refused", e.errno)\na, b = socket.socketpair(); a.send(b"x"); print("pair", b.recv(1))`,
  ];

  it('no host socket is visible and connect() is refused; socketpair works', async () => {
    const before = connections;
    const sandbox = createSandbox(defaults);
    // The path is not in the view (ENOENT would do), and seccomp refuses connect first: EPERM.
    const result = await sandbox.run(python, connect(socketPath));
    expect(result.stdout).toBe("refused 1\npair b'x'\n");
    // Even a socket bound into the view read-only cannot be connected to.
    const bound = await sandbox.run(python, connect(socketPath), { readOnlyPaths: [socketPath] });
    expect(bound.stdout).toBe("refused 1\npair b'x'\n");
    expect(connections).toBe(before);
    expect(result.controls).toContain(SandboxControl.seccompNoUnixConnect);
  });

  it('connects to a socket the policy names, and to no other', async () => {
    const before = connections;
    const sandbox = createSandbox({ ...defaults, allowUnixSockets: [socketPath] });
    const result = await sandbox.run(python, connect(socketPath));
    expect(result.stdout).toBe("connected b'hello\\n'\npair b'x'\n");
    expect(connections).toBe(before + 1);
    const other = await sandbox.run(python, connect('/run/docker.sock'));
    expect(other.stdout).toBe("refused 2\npair b'x'\n");
  });
});

describe('host secrets are not in the view', () => {
  it('shows no /root, /home, /run, /var, /mnt, /srv, host cwd, shadow or SSH keys', async () => {
    const result = await sh(
      [
        `for p in /root /home/root /run /var/run /var/tmp /var /mnt /media /srv /opt /boot /sys ${shellQuote(process.cwd())}; do [ -e "$p" ] && echo "visible $p"; done`,
        'ls /home',
        'cat /etc/shadow 2>/dev/null | wc -c; cat /etc/gshadow 2>/dev/null | wc -c',
        'ls -A /etc/ssh | wc -l; ls -A /etc/ssl/private 2>/dev/null | wc -l',
        'pwd',
      ].join('; '),
    );
    expect(result.stdout).toBe('sandbox\n0\n0\n0\n0\n/home/sandbox\n');
    expect(readFileSync('/etc/shadow', 'utf8').length).toBeGreaterThan(0);
  });

  it("the host's cwd and its .env are not visible unless the policy names them", async () => {
    const dir = tempDir();
    writeFileSync(join(dir, '.env'), 'API_KEY=secret\n');
    const result = await createSandbox(defaults).run('/bin/cat', [join(dir, '.env')]);
    expect(result.stdout).toBe('');
    expect(result.stderr).toContain('No such file or directory');
    // The check below means something only when the checkout is outside every host path shown.
    const shownRows = defaultFilesystemView.filter((row) => row.access === 'read-only');
    const inside = shownRows.filter((row) => `${process.cwd()}/`.startsWith(`${row.path}/`));
    expect(inside).toEqual([]);
    const cwd = await sh(`ls ${process.cwd()} 2>&1 | head -1`);
    expect(cwd.stdout).toContain('No such file or directory');
  });
});

describe('inherited host descriptors (runc CVE-2024-21626 class)', () => {
  it('a non-CLOEXEC fd to a secret file and one to a directory never reach the command', async () => {
    const dir = tempDir();
    const secret = join(dir, 'secret.txt');
    writeFileSync(secret, 'the secret\n');
    const target = sandboxDir(join(dir, 'hostdir'));
    // A child Node host that inherits both descriptors without FD_CLOEXEC (as from its parent),
    // then runs a command that lists its fds and tries /proc/self/fd/N/ on those two.
    const hostScript = `
      const { createSandbox } = await import(${JSON.stringify(join(import.meta.dirname, '../src/index.ts'))});
      const r = await createSandbox({ allowNetwork: false, allowFileWrites: false }).run('/bin/sh', ['-c',
        'ls /proc/self/fd | sort -n | tr "\\\\n" " "; for n in 30 200; do cat /proc/self/fd/$n 2>/dev/null; echo x > /proc/self/fd/$n/planted 2>/dev/null && echo planted; done; true']);
      process.stdout.write(JSON.stringify(r));`;
    const secretFd = openSync(secret, 'r');
    const dirFd = openSync(target, 'r');
    const child = spawn(
      node,
      ['--conditions=@coda/source', '--input-type=module', '-e', hostScript],
      {
        // On fds 30 and 200: far above the wrapper's own pipes (3 to 5), which would overwrite
        // low ones and hide a missing close.
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
    const result = JSON.parse(out) as { stdout: string; controls: string[] };
    // 0, 1, 2, and 3: the descriptor ls itself opens to read /proc/self/fd.
    expect(result.stdout).toBe('0 1 2 3 ');
    expect(existsSync(join(target, 'planted'))).toBe(false);
    expect(result.controls).toContain(SandboxControl.inheritedDescriptorsClosed);
  });
});

describe('paths through symlinks planted by an earlier run', () => {
  it('refuses a restrictToDirectory redirected by a link an earlier run planted', async () => {
    const jobs = tempDir('/var/tmp');
    const job42 = sandboxDir(join(jobs, '42'));
    const job43 = sandboxDir(join(jobs, '43'));
    writeFileSync(join(job43, 'data.txt'), 'not yours');
    // Run 1 could write job 42's directory and planted these; run 2 is given job42/out.
    symlinkSync('../43', join(job42, 'out'));
    symlinkSync('/etc', join(job42, 'etc'));
    for (const name of ['out', 'etc']) {
      const sandbox = createSandbox({
        allowFileWrites: true,
        restrictToDirectory: join(job42, name),
      });
      await expect(sandbox.run('/bin/true')).rejects.toMatchObject({
        code: 'VALIDATION',
        issues: [{ path: 'restrictToDirectory', message: expect.stringContaining('leads out of') }],
      });
    }
    // A link that stays inside the directory that holds it is fine.
    const sandboxed = sandboxDir(join(jobs, 'real'));
    symlinkSync('real', join(jobs, 'inner-link'));
    const ok = await createSandbox({ restrictToDirectory: join(jobs, 'inner-link') }).run(
      '/bin/pwd',
    );
    expect(ok.stdout).toBe(`${sandboxed}\n`);
  });

  it('refuses readOnlyPaths that lead into a hidden path, and a cwd inside one', async () => {
    const dir = tempDir('/var/tmp');
    const hidden = sandboxDir(join(dir, 'hidden'));
    writeFileSync(join(hidden, 'key'), 'secret');
    symlinkSync('hidden', join(dir, 'alias'));
    const sandbox = createSandbox({ ...defaults, hidePaths: [hidden] });
    await expect(
      sandbox.run('/bin/cat', [join(dir, 'alias', 'key')], { readOnlyPaths: [join(dir, 'alias')] }),
    ).rejects.toMatchObject({
      code: 'VALIDATION',
      issues: [{ path: 'readOnlyPaths.0', message: `inside hidePaths entry ${hidden}` }],
    });
    await expect(sandbox.run('/bin/ls', [], { cwd: hidden })).rejects.toMatchObject({
      code: 'VALIDATION',
      issues: [{ path: 'cwd', message: `inside hidePaths entry ${hidden}` }],
    });
  });

  it('mounts nothing below a bound host directory, where a concurrent run could swap a name', async () => {
    // Our own attack review raced `cwd: job/sub` against a concurrent run exchanging `sub` with
    // `lnk -> ../../etc` (renameat2): bwrap looks mount destinations up by name, and the cwd's
    // bind landed on the view's /etc. Now a path inside another addition is reached through it.
    const job = tempDir('/var/tmp');
    const sub = sandboxDir(join(job, 'sub'));
    const { request, plan } = prepareLaunch(
      { policy: resolveSubprocessPolicy({ restrictToDirectory: job }), onDegraded() {} },
      '/bin/true',
      [],
      { cwd: sub },
    );
    releasePlan(plan);
    const pins: CheckedPath[] = [];
    const { options } = bwrapArguments(request, runIdentity(request.policy), [], true, pins);
    releasePins(pins);
    const destinations = options.flatMap((arg, i) =>
      ['--bind', '--ro-bind'].includes(arg) ? [options[i + 2]] : [],
    );
    expect(destinations.filter((dest) => dest?.startsWith(job))).toEqual([job]);
    // The cwd is still the one asked for, reached through the writable directory.
    const result = await createSandbox({ restrictToDirectory: job }).run('/bin/pwd', [], {
      cwd: sub,
    });
    expect(result.stdout).toBe(`${sub}\n`);
  });

  it('mounts a writable path below /usr only when no directory on its way is writable by others', async () => {
    // The second review's race: run A can write /usr/local/shared, run B writes
    // /usr/local/shared/b; bwrap resolves B's destination through the host's /usr/local/shared.
    const shared = mkdtempSync('/usr/local/coda-escapes-');
    onTestFinished(() => rmSync(shared, { recursive: true, force: true }));
    const job = sandboxDir(join(shared, 'b'));
    chmodSync(shared, 0o755);
    const ok = await createSandbox({ restrictToDirectory: job }).run('/bin/sh', [
      '-c',
      'echo x > f && pwd',
    ]);
    expect(ok.stdout).toBe(`${job}\n`);
    chmodSync(shared, 0o777);
    await expect(
      createSandbox({ restrictToDirectory: job }).run('/bin/true'),
    ).rejects.toMatchObject({
      code: 'VALIDATION',
      issues: [
        {
          path: 'restrictToDirectory',
          message: `${shared} on its way from /usr is writable by others than root: a concurrent run could redirect the mount`,
        },
      ],
    });
    // Read-only paths there need no mount at all: the view shows /usr as the host has it.
    const seen = await createSandbox(defaults).run('/bin/cat', [join(job, 'f')], {
      readOnlyPaths: [job],
    });
    expect(seen.stdout).toBe('x\n');
  });

  it('refuses a read-only path inside the writable directory and a hidden path inside it', async () => {
    const job = tempDir('/var/tmp');
    const inner = sandboxDir(join(job, 'inputs'));
    await expect(
      createSandbox({ restrictToDirectory: job }).run('/bin/true', [], { readOnlyPaths: [inner] }),
    ).rejects.toMatchObject({
      code: 'VALIDATION',
      issues: [
        { path: 'readOnlyPaths.0', message: expect.stringContaining('inside restrictToDirectory') },
      ],
    });
    // A command could rename `inputs` and, in a later run, read what the mask no longer covers.
    writeFileSync(join(inner, 'secret.txt'), 'secret');
    await expect(
      createSandbox({ restrictToDirectory: job, hidePaths: [join(inner, 'secret.txt')] }).run(
        '/bin/true',
      ),
    ).rejects.toMatchObject({
      code: 'VALIDATION',
      issues: [{ path: 'hidePaths', message: expect.stringContaining('could move it out') }],
    });
  });

  it('passes a variable named like the restoring loop’s own variable unchanged', async () => {
    const result = await createSandbox(defaults).run('/bin/sh', ['-c', 'echo "$v|$PATH"'], {
      env: { v: 'PATH', PATH: '/usr/bin:/bin' },
    });
    expect(result.stdout).toBe('PATH|/usr/bin:/bin\n');
  });

  it('reserves the prefix that carries the environment past setpriv', async () => {
    await expect(
      createSandbox(defaults).run('/bin/true', [], { env: { CODA_SANDBOX_ENV_X: '1' } }),
    ).rejects.toMatchObject({ code: 'VALIDATION', issues: [{ path: 'env.CODA_SANDBOX_ENV_X' }] });
  });

  it('hides a path even when the host process runs inside it', async () => {
    const dir = tempDir('/var/tmp');
    writeFileSync(join(dir, 'secret.txt'), 'secret');
    const cwd = process.cwd();
    process.chdir(dir);
    try {
      const result = await createSandbox({ ...defaults, hidePaths: [dir] }).run('/bin/sh', [
        '-c',
        `pwd; cat ${dir}/secret.txt 2>/dev/null || echo hidden`,
      ]);
      expect(result.stdout).toBe('/home/sandbox\nhidden\n');
    } finally {
      process.chdir(cwd);
    }
  });

  it("one run cannot see another concurrent run's writable directory", async () => {
    const a = tempDir('/var/tmp');
    const b = tempDir('/var/tmp');
    writeFileSync(join(b, 'b-secret.txt'), 'b');
    const runA = createSandbox({ restrictToDirectory: a }).run('/bin/sh', [
      '-c',
      `sleep 0.2; cat ${b}/b-secret.txt 2>/dev/null || echo invisible`,
    ]);
    const runB = createSandbox({ restrictToDirectory: b }).run('/bin/sh', ['-c', 'sleep 0.4']);
    const [resultA] = await Promise.all([runA, runB]);
    expect(resultA.stdout).toBe('invisible\n');
  });
});

describe('allowFileWrites: false', () => {
  it('leaves /dev, /dev/shm, /tmp and HOME read-only', async () => {
    const result = await sh(
      'for p in /dev/x /dev/shm/x /tmp/x /home/sandbox/x; do (echo x > $p) 2>/dev/null || echo "refused $p"; done; echo ok > /dev/null && echo null-writable',
    );
    expect(result.stdout).toBe(
      'refused /dev/x\nrefused /dev/shm/x\nrefused /tmp/x\nrefused /home/sandbox/x\nnull-writable\n',
    );
  });

  it('with writes allowed, /dev/shm, /tmp and HOME are private and writable, /dev is not', async () => {
    const result = await createSandbox({ allowNetwork: false }).run('/bin/sh', [
      '-c',
      'for p in /dev/x /dev/shm/x /tmp/x /home/sandbox/x; do (echo x > $p) 2>/dev/null && echo "wrote $p"; done; true',
    ]);
    expect(result.stdout).toBe('wrote /dev/shm/x\nwrote /tmp/x\nwrote /home/sandbox/x\n');
  });
});

describe('NUL bytes', () => {
  const sandbox = createSandbox(defaults);
  it.each([
    ['args.1', () => sandbox.run('/bin/echo', ['a', 'b\0c'])],
    ['file', () => sandbox.run('/bin/echo\0x', [])],
    ['env.A', () => sandbox.run('/bin/true', [], { env: { A: 'x\0y' } })],
    ['cwd', () => sandbox.run('/bin/true', [], { cwd: '/tmp\0/x' })],
    ['readOnlyPaths.0', () => sandbox.run('/bin/true', [], { readOnlyPaths: ['/usr\0/x'] })],
  ])('are refused with VALIDATION naming %s, on the warm and the cold path', async (field, run) => {
    await expect(run()).rejects.toMatchObject({
      code: 'VALIDATION',
      issues: [expect.objectContaining({ path: field })],
    });
    expect(() => sandbox.execSync('/bin/true', { env: { A: 'x\0y' } })).toThrow(/env\.A/);
  });

  it('in the policy too', () => {
    expect(() => createSandbox({ env: { A: 'x\0' } })).toThrow(/env\.A: contains a NUL byte/);
    expect(() => createSandbox({ restrictToDirectory: '/tmp\0' })).toThrow(
      /restrictToDirectory: contains a NUL byte/,
    );
  });
});

describe('nothing left behind', () => {
  it('no temp files after runs, warm, cold and synchronous', async () => {
    const leftovers = () =>
      readdirSync(tmpdir()).filter(
        (n) => n.startsWith('coda-seccomp-') || n.startsWith('coda-run-'),
      );
    const before = leftovers();
    const sandbox = createSandbox(defaults);
    await sandbox.run('/bin/true');
    await sandbox.run('/bin/true', [], { maxMemoryMb: 0, rlimits: { processes: 4_194_304 } });
    sandbox.execSync('/bin/true');
    expect(leftovers()).toEqual(before);
  });
});

/** esbuild's binary: a real Go program (static, its own runtime and threads), from npm. */
const goProgram = createRequire(createRequire(import.meta.url).resolve('esbuild')).resolve(
  `@esbuild/linux-${process.arch}/bin/esbuild`,
);

describe('common programs under the default view', () => {
  it.each([
    ['node', node, ['-e', 'console.log(require("os").homedir(), 1 + 1)'], '/home/sandbox 2\n'],
    [
      'python',
      python,
      ['-c', 'import json, os; print(json.dumps(os.getcwd()))'],
      '"/home/sandbox"\n',
    ],
    ['shell', '/bin/sh', ['-c', 'echo $HOME; ls /usr/bin/env'], '/home/sandbox\n/usr/bin/env\n'],
    ['perl', '/usr/bin/perl', ['-e', 'print "perl\\n"'], 'perl\n'],
    ['go (esbuild)', goProgram, ['--version'], `${esbuildVersion}\n`],
    ['go (esbuild) at work', goProgram, ['--loader=ts', '--log-level=error'], 'let a = 1;\n'],
  ])('%s starts and runs', async (_name, file, args, expected) => {
    const result = await createSandbox().run(file, args, { input: 'let a: number = 1' });
    expect(result.stderr).toBe('');
    expect(result.stdout).toBe(expected);
  });
});

describe('twenty runs at once on the warm-launcher pool', () => {
  it('every result is its own, and no run sees another run’s files', async () => {
    const sandbox = createSandbox({ allowNetwork: false });
    await sandbox.run('/bin/true'); // the pool of this shape exists from here on
    const dirs = Array.from({ length: 20 }, () => tempDir('/var/tmp'));
    const results = await Promise.all(
      dirs.map((dir, index) =>
        createSandbox({ allowNetwork: false, restrictToDirectory: dir }).run(
          '/bin/sh',
          [
            '-c',
            `echo run-${index} > mine.txt; sleep 0.1; cat mine.txt; echo "$TAG"; ls ${dirs.filter((other) => other !== dir).join(' ')} 2>/dev/null | wc -l; ls /tmp | wc -l`,
          ],
          { env: { TAG: `tag-${index}` } },
        ),
      ),
    );
    results.forEach((result, index) => {
      expect(result.stdout).toBe(`run-${index}\ntag-${index}\n0\n0\n`);
      expect(readFileSync(join(dirs[index]!, 'mine.txt'), 'utf8')).toBe(`run-${index}\n`);
    });
  });
});

describe('descriptors of the host', () => {
  it('runs, refused runs and synchronous runs leave the host with exactly the descriptors it had', async () => {
    const sandbox = createSandbox(defaults);
    await sandbox.run('/bin/true'); // pools and caches exist from here on
    // Files and directories only: the pinned paths and execSync's inputs are those; launcher
    // pipes and the event loop's own descriptors come and go with the pool.
    const files = (): string[] =>
      readdirSync('/proc/self/fd')
        .flatMap((fd) => {
          try {
            return [readlinkSync(`/proc/self/fd/${fd}`)];
          } catch {
            return [];
          }
        })
        .filter((target) => target.startsWith('/'))
        .sort();
    const before = files();
    const dir = tempDir('/var/tmp');
    for (let i = 0; i < 5; i++) {
      await sandbox.run('/bin/true', [], { readOnlyPaths: [dir], cwd: dir });
      await expect(sandbox.run('/bin/echo', ['a\0b'])).rejects.toMatchObject({
        code: 'VALIDATION',
      });
      await expect(
        sandbox.run('/bin/true', [], { readOnlyPaths: [dir, '/definitely/missing'] }),
      ).rejects.toMatchObject({ code: 'VALIDATION' });
      sandbox.execSync('/bin/true', { readOnlyPaths: [dir] });
    }
    expect(files()).toEqual(before);
  });
});
