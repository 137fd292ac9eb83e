// Real bubblewrap, real seccomp, real cgroups: what a confined command can and cannot do.
import {
  chmodSync,
  chownSync,
  existsSync,
  readFileSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { createServer, type Server } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSandbox, SandboxControl, seccompAllowlist } from '../src/index.ts';
import { python, sandboxDir, tempDir } from './support/helpers.ts';

const fixture = (name: string): string => join(import.meta.dirname, 'fixtures', name);
const EPERM = 1;

describe('network', () => {
  let server: Server;
  let port = 0;
  let connections = 0;
  beforeAll(async () => {
    server = createServer((socket) => {
      connections++;
      socket.end();
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as { port: number }).port;
  });
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

  const connect = (): string[] => [
    '-c',
    `import socket\ntry:\n socket.create_connection(("127.0.0.1", ${port}), 2).close(); print("connected")\nexcept OSError as e: print("blocked", e.errno)`,
  ];

  it('is denied: a connection to a loopback server never arrives', async () => {
    const before = connections;
    const result = await createSandbox({ allowNetwork: false }).run(python, connect());
    expect(result.stdout).toBe(`blocked ${EPERM}\n`);
    expect(result.controls).toEqual(
      expect.arrayContaining([SandboxControl.networkNamespace, SandboxControl.seccompNoInet]),
    );
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(connections).toBe(before);
  });

  it('is allowed when the policy says so', async () => {
    const before = connections;
    const result = await createSandbox({ allowNetwork: true }).run(python, connect());
    expect(result.stdout).toBe('connected\n');
    expect(result.controls).not.toContain(SandboxControl.networkNamespace);
    expect(connections).toBe(before + 1);
  });
});

describe('file system', () => {
  // Under /var/tmp, which the sandbox sees read-only (its /tmp is private), so that a write
  // outside the allowed directory would land on the host if confinement failed.
  it('lets a command write only inside the allowed directory', async () => {
    const base = tempDir('/var/tmp');
    const allowed = sandboxDir(join(base, 'allowed'));
    symlinkSync(base, join(allowed, 'escape-link'));
    const sandbox = createSandbox({ allowFileWrites: true, restrictToDirectory: allowed });
    const script = [
      'echo inside > inside.txt && echo wrote-inside',
      'echo x > ../outside.txt 2>/dev/null || echo dotdot-refused',
      'echo x > escape-link/linked.txt 2>/dev/null || echo symlink-refused',
      `echo x > ${base}/absolute.txt 2>/dev/null || echo absolute-refused`,
      'echo x > /etc/coda-test 2>/dev/null || echo etc-refused',
      'echo x > /tmp/private && echo tmp-private',
    ].join('\n');
    const result = await sandbox.run('/bin/sh', ['-c', script]);
    expect(result.stdout).toBe(
      'wrote-inside\ndotdot-refused\nsymlink-refused\nabsolute-refused\netc-refused\ntmp-private\n',
    );
    expect(readFileSync(join(allowed, 'inside.txt'), 'utf8')).toBe('inside\n');
    for (const file of ['outside.txt', 'linked.txt', 'absolute.txt']) {
      expect(existsSync(join(base, file))).toBe(false);
    }
    expect(existsSync('/tmp/private')).toBe(false);
    expect(result.controls).toContain(SandboxControl.writableDirectory);
  });

  it('resolves `..` and symlinks in restrictToDirectory before binding it', async () => {
    const base = tempDir('/var/tmp');
    sandboxDir(join(base, 'real'));
    symlinkSync(join(base, 'real'), join(base, 'link'));
    const sandbox = createSandbox({ restrictToDirectory: join(base, 'real', '..', 'link') });
    const result = await sandbox.run('/bin/sh', ['-c', 'pwd; echo ok > f.txt']);
    expect(result.stdout).toBe(`${join(base, 'real')}\n`);
    expect(readFileSync(join(base, 'real', 'f.txt'), 'utf8')).toBe('ok\n');
  });

  it('binds a writable directory under the host /tmp through the private /tmp', async () => {
    const dir = tempDir();
    const result = await createSandbox({ restrictToDirectory: dir }).run('/bin/sh', [
      '-c',
      'echo kept > kept.txt && ls /tmp | wc -l',
    ]);
    expect(result.success).toBe(true);
    expect(readFileSync(join(dir, 'kept.txt'), 'utf8')).toBe('kept\n');
    // Only the path down to the bound directory exists in the private /tmp.
    expect(result.stdout.trim()).toBe('1');
  });

  it('allows no writes at all when allowFileWrites is false', async () => {
    const dir = tempDir('/var/tmp');
    const sandbox = createSandbox({ allowFileWrites: false, restrictToDirectory: dir });
    const result = await sandbox.run('/bin/sh', [
      '-c',
      'echo x > here.txt 2>/dev/null || echo cwd-refused; echo x > /tmp/t 2>/dev/null || echo tmp-refused',
    ]);
    expect(result.stdout).toBe('cwd-refused\ntmp-refused\n');
    expect(existsSync(join(dir, 'here.txt'))).toBe(false);
    expect(result.controls).toContain(SandboxControl.noFileWrites);
  });

  it('claims no-file-writes only when the run could write nothing: a table of what it wrote', async () => {
    // Found by an attack review: with allowFileWrites and no host directory, /tmp, home and
    // /dev/shm took writes while controls said no-file-writes.
    const dir = tempDir('/var/tmp');
    const table = [
      { policy: { allowFileWrites: true }, wrote: 'tmp home shm\n', control: undefined },
      { policy: { allowFileWrites: false }, wrote: '\n', control: 'no-file-writes' },
      {
        policy: { allowFileWrites: true, restrictToDirectory: dir },
        wrote: 'tmp home shm\n',
        control: 'writable-directory',
      },
    ];
    const script = [
      'w=',
      'echo x 2>/dev/null >/tmp/f && w="$w tmp"',
      'echo x 2>/dev/null >"$HOME/f" && w="$w home"',
      'echo x 2>/dev/null >/dev/shm/f && w="$w shm"',
      'echo $w',
    ].join('; ');
    for (const row of table) {
      const result = await createSandbox(row.policy).run('/bin/sh', ['-c', script]);
      const wrote = result.stdout;
      const writeControls = result.controls.filter((control) =>
        ['no-file-writes', 'writable-directory'].includes(control),
      );
      expect({ policy: row.policy, wrote, writeControls }).toEqual({
        policy: row.policy,
        wrote: row.wrote,
        writeControls: row.control === undefined ? [] : [row.control],
      });
    }
  });

  it('hides host paths listed in hidePaths, also inside a path the view adds', async () => {
    const dir = tempDir('/var/tmp');
    const secrets = sandboxDir(join(dir, 'secrets'));
    writeFileSync(join(secrets, 'secret.txt'), 'top secret');
    writeFileSync(join(dir, 'visible.txt'), 'visible');
    const sandbox = createSandbox({ hidePaths: [secrets], allowFileWrites: false });
    const result = await sandbox.run('/bin/sh', ['-c', `ls -A ${dir}; ls -A ${secrets} | wc -l`], {
      readOnlyPaths: [dir],
    });
    expect(result.stdout).toBe('secrets\nvisible.txt\n0\n');
    expect(result.controls).toContain(SandboxControl.hiddenPaths);
  });
});

describe('runAs', () => {
  it('keeps root-only files unreadable for a command run as an unprivileged user', async () => {
    const dir = tempDir('/var/tmp');
    chmodSync(dir, 0o777);
    const secret = join(dir, 'root-only.txt');
    writeFileSync(secret, 'root secret\n', { mode: 0o600 });
    const script = `id -u; cat ${secret} 2>/dev/null || echo unreadable; echo made > "made-$(id -u).txt" && echo wrote`;
    const asRoot = await createSandbox({ restrictToDirectory: dir, runAs: 'host' }).run('/bin/sh', [
      '-c',
      script,
    ]);
    expect(asRoot.stdout).toBe('0\nroot secret\nwrote\n');
    expect(asRoot.controls).toContain(SandboxControl.hostIdentity);

    // The default on a root host: nobody.
    const result = await createSandbox({ restrictToDirectory: dir }).run('/bin/sh', ['-c', script]);
    expect(result.stdout).toBe('65534\nunreadable\nwrote\n');
    expect(statSync(join(dir, 'made-65534.txt')).uid).toBe(65534);
    expect(result.controls).toEqual(
      expect.arrayContaining([
        SandboxControl.unprivilegedIdentity,
        SandboxControl.bubblewrap,
        SandboxControl.memoryCgroupV1,
      ]),
    );
    expect(result.controls).not.toContain(SandboxControl.hostIdentity);

    const other = createSandbox({ restrictToDirectory: dir, runAs: { uid: 4242, gid: 4242 } });
    const as4242 = await other.run('/bin/sh', ['-c', 'id -u; id -g']);
    expect(as4242.stdout).toBe('4242\n4242\n');
  });

  it('refuses, naming the field, a path the unprivileged identity could not use', async () => {
    const dir = tempDir('/var/tmp');
    chownSync(dir, 0, 0); // mkdtemp's mode 0700, and the host's root as owner
    writeFileSync(join(dir, 'data.txt'), 'data\n');
    const refusal = (field: string, what: string) => ({
      code: 'VALIDATION',
      details: {
        issues: [
          {
            path: field,
            message: `not ${what} by the sandbox identity 65534:65534 (${what === 'readable' ? 'make it readable by others' : 'chown it'}, or set runAs)`,
            received: JSON.stringify(dir),
          },
        ],
      },
    });
    const reader = createSandbox({ readOnlyPaths: [dir] });
    await expect(reader.run('/bin/ls', [dir])).rejects.toMatchObject(
      refusal('policy.readOnlyPaths.0', 'readable'),
    );
    const writer = createSandbox({ allowFileWrites: true, writablePaths: [dir] });
    await expect(writer.run('/bin/ls', [dir])).rejects.toMatchObject(
      refusal('policy.writablePaths.0', 'writable'),
    );
    // The host's identity may use it; so may nobody once the mode lets others in.
    const asHost = await createSandbox({ readOnlyPaths: [dir], runAs: 'host' }).run('/bin/ls', [
      dir,
    ]);
    expect(asHost.stdout).toBe('data.txt\n');
    chmodSync(dir, 0o755);
    expect((await reader.run('/bin/ls', [dir])).stdout).toBe('data.txt\n');
  });
});

describe('process confinement', () => {
  it('hides the host environment', async () => {
    process.env.CODA_TEST_SECRET = 'hunter2';
    try {
      const sandbox = createSandbox({ env: { GREETING: 'hello' } });
      const result = await sandbox.run('/usr/bin/env', [], { env: { EXTRA: '1' } });
      expect(result.stdout).not.toContain('hunter2');
      const names = result.stdout
        .trim()
        .split('\n')
        .map((line) => line.split('=')[0])
        .sort();
      // HOME is the private home, PWD the cwd; SHLVL=0 the sandbox's default (once exported by
      // the bash that restored the environment; env sets it now, exact-environment.ts).
      const always = ['EXTRA', 'GREETING', 'HOME', 'PWD', 'SHLVL'];
      const fromHost = ['PATH', 'LANG', 'LC_ALL', 'LC_CTYPE', 'TZ', 'TERM'].filter(
        (name) => process.env[name] !== undefined,
      );
      expect(names).toEqual([...always, ...fromHost].sort());
      expect(result.stdout).toContain('HOME=/home/sandbox\n');
    } finally {
      delete process.env.CODA_TEST_SECRET;
    }
  });

  it('runs with seccomp in filter mode and no new privileges', async () => {
    const result = await createSandbox().run('/bin/grep', [
      '-E',
      '^(Seccomp|NoNewPrivs|CapEff):',
      '/proc/self/status',
    ]);
    expect(result.stdout.trim().split('\n').sort()).toEqual([
      'CapEff:\t0000000000000000',
      'NoNewPrivs:\t1',
      'Seccomp:\t2',
    ]);
    expect(result.success).toBe(true);
    expect(result.sandboxApplied).toBe(true);
  });

  it('refuses ptrace, mount, new namespaces and inet sockets, keeps unix sockets', async () => {
    const result = await createSandbox({ allowNetwork: false }).run(
      python,
      [fixture('syscalls.py')],
      { readOnlyPaths: [fixture('syscalls.py')] },
    );
    expect(JSON.parse(result.stdout)).toEqual({
      ptrace: EPERM,
      mount: EPERM,
      unshare_user: EPERM,
      inet_socket: EPERM,
      unix_socket: 0,
    });
  });

  it('blocks a syscall outside the allowlist', async () => {
    // Everything the default allows but mkdir and mkdirat (the input; the outcome is the test's).
    const allowed = [
      ...seccompAllowlist.groups.flatMap((group) => group.names),
      ...seccompAllowlist.argumentRules.map((rule) => rule.syscall),
      'socket',
      'connect',
      'sendto',
    ].filter((name) => name !== 'mkdir' && name !== 'mkdirat');
    const sandbox = createSandbox({ allowedSyscalls: allowed, allowFileWrites: true });
    const dir = tempDir('/var/tmp');
    const result = await sandbox.run('/bin/mkdir', ['made'], { cwd: dir });
    expect(result.success).toBe(false);
    expect(result.stderr).toContain('Operation not permitted');
    expect(existsSync(join(dir, 'made'))).toBe(false);
    expect(result.controls).toContain(SandboxControl.seccompAllowlist);
    const ok = await sandbox.run('/bin/echo', ['fine']);
    expect(ok.stdout).toBe('fine\n');
  });

  it('passes shell metacharacters as plain text', async () => {
    const marker = join(tempDir('/var/tmp'), 'pwned');
    const result = await createSandbox().exec(`echo a; touch ${marker} && $(id) \`id\` | cat`);
    expect(result.stdout).toBe(`a; touch ${marker} && $(id) \`id\` | cat\n`);
    expect(existsSync(marker)).toBe(false);
  });

  it('reports a missing binary clearly', async () => {
    const result = await createSandbox().exec('no-such-binary-coda --flag');
    expect(result).toMatchObject({
      success: false,
      exitCode: null,
      error: 'Command not found: no-such-binary-coda',
      sandboxApplied: false,
    });
  });

  it('caps a flood of output and keeps the first bytes', async () => {
    const result = await createSandbox({ maxOutputBytes: 1024 * 1024 }).run('/usr/bin/head', [
      '-c',
      '20000000',
      '/dev/zero',
    ]);
    expect(result.success).toBe(true);
    expect(result.stdout.length).toBe(1024 * 1024);
    expect(result.stdoutTruncated).toBe(true);
    expect(result.stderrTruncated).toBe(false);
  });

  it('lists every control it enforced', async () => {
    const result = await createSandbox({ allowNetwork: false, timeoutMs: 5_000 }).run('/bin/true');
    expect(result.controls).toEqual(
      expect.arrayContaining([
        'bubblewrap',
        'namespace:pid',
        'namespace:ipc',
        'namespace:uts',
        'namespace:mount',
        'namespace:net',
        'filesystem-view',
        'identity:unprivileged',
        'inherited-fds-closed',
        'clean-helper-environment',
        'seccomp-no-unix-connect',
        'private-tmp',
        'new-session',
        'capabilities-dropped',
        'no-new-privileges',
        'seccomp',
        'seccomp-no-inet-sockets',
        'clean-environment',
        'rlimit-cpu',
        'rlimit-nofile',
        'rlimit-fsize',
        'rlimit-core',
        'wall-clock-timeout',
        'kill:pid-namespace',
        'output-cap',
      ]),
    );
  });
});
