// The Landlock applier on the real kernel, each of its protections alone (no seccomp filter unless
// the test is about it), so that each one is seen doing its own work: file-system rules, masks
// left out of a readable tree, TCP, abstract Unix socket and signal scoping, descriptors,
// environment, no_new_privs and the filter.
import { spawn } from 'node:child_process';
import { closeSync, mkdirSync, renameSync, statSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { hostPaths } from '../src/linux/host-paths.ts';
import { applierArgv, encodeInstructions } from '../src/linux/landlock/landlock-plan.ts';
import { detectLandlock } from '../src/linux/landlock/landlock-probe.ts';
import { filesystemRules, treeHost } from '../src/linux/landlock/landlock-rules.ts';
import { seccompProgram } from '../src/linux/seccomp/program-cache.ts';
import { unlinkedFile } from '../src/process/unlinked-file.ts';
import { python, tempDir } from './support/helpers.ts';

const abi = detectLandlock().abi!;
/** Every right of this ABI, from the kernel's header (not from the code): ABI 7 has 16. */
const allFs = abi >= 5 ? 0xffff : abi >= 3 ? 0x7fff : abi >= 2 ? 0x3fff : 0x1fff;
const read = 1 | 4 | 8; // EXECUTE | READ_FILE | READ_DIR
const system = ['/usr', '/bin', '/lib', '/lib64', '/etc'].map((path) => ({ path, access: read }));
const servers: Server[] = [];
afterEach(() => {
  for (const server of servers.splice(0)) server.close();
});

interface Applied {
  readonly handledNet?: number;
  readonly scoped?: number;
  readonly paths?: readonly { path: string; access: number; pin?: string }[];
  readonly env?: Record<string, string>;
  readonly seccomp?: boolean;
  readonly extraFd?: number;
}

/** Runs `command` through the applier; resolves with its exit code and output. */
async function applied(
  command: string[],
  options: Applied = {},
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const instructions = encodeInstructions({
    handledFs: allFs,
    handledNet: options.handledNet ?? 0,
    scoped: options.scoped ?? 0,
    paths: options.paths ?? system,
    ports: [],
    env: options.env ?? {},
    cwd: '/',
    command,
  });
  const fds = [
    unlinkedFile(
      options.seccomp === true ? seccompProgram({ allowNetwork: false }) : new Uint8Array(0),
    ),
    unlinkedFile(Buffer.from(instructions)),
  ];
  const stdio: ('pipe' | 'ignore' | number)[] = ['ignore', 'pipe', 'pipe', ...fds];
  if (options.extraFd !== undefined) {
    while (stdio.length < 30) stdio.push('ignore');
    stdio.push(options.extraFd);
  }
  const [file, ...args] = applierArgv({ extraPipes: 0 }, options.seccomp === true);
  const child = spawn(file!, args, { stdio, env: {} });
  for (const fd of fds) closeSync(fd);
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (chunk) => (stdout += chunk));
  child.stderr!.on('data', (chunk) => (stderr += chunk));
  const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
  return { code, stdout, stderr };
}

async function listening(
  address: string | number,
): Promise<{ accepted: () => number; port: number }> {
  let count = 0;
  const server = createServer((socket) => {
    count++;
    socket.destroy();
  });
  servers.push(server);
  await new Promise<void>((resolve) =>
    typeof address === 'number'
      ? server.listen(address, '127.0.0.1', resolve)
      : server.listen(address, resolve),
  );
  const port = typeof address === 'number' ? (server.address() as { port: number }).port : 0;
  return { accepted: () => count, port };
}

const connectScript = (family: string, address: string): string[] => [
  '-c',
  `import socket\ns = socket.socket(socket.${family}, socket.SOCK_STREAM)\ntry:\n s.connect(${address}); print("connected")\nexcept OSError as e: print("refused", e.errno)`,
];

describe('the Landlock applier', () => {
  it('grants reads beneath the rules, refuses every other read and every write (EACCES)', async () => {
    const dir = tempDir();
    writeFileSync(join(dir, 'secret'), 'secret');
    const granted = await applied(['/bin/cat', '/etc/hostname']);
    expect(granted.code).toBe(0);
    const secret = await applied(['/bin/cat', join(dir, 'secret')]);
    expect(secret).toMatchObject({ code: 1, stdout: '' });
    expect(secret.stderr).toContain('Permission denied');
    const write = await applied(['/bin/sh', '-c', `echo x > ${dir}/new`]);
    expect(write.code).toBe(2);
    expect(write.stderr).toContain('Permission denied');
    const writable = await applied(['/bin/sh', '-c', `echo x > ${dir}/new && cat ${dir}/new`], {
      paths: [...system, { path: dir, access: allFs }],
    });
    expect(writable).toMatchObject({ code: 0, stdout: 'x\n' });
  });

  it('refuses a checked path that names another file by the time it is opened', async () => {
    const dir = tempDir();
    mkdirSync(join(dir, 'checked'));
    writeFileSync(join(dir, 'checked', 'data'), 'checked data');
    const stats = statSync(join(dir, 'checked'));
    const rule = (pin: string) => [...system, { path: join(dir, 'checked'), access: read, pin }];
    const same = await applied(['/bin/cat', join(dir, 'checked', 'data')], {
      paths: rule(`${stats.dev}:${stats.ino}`),
    });
    expect(same).toMatchObject({ code: 0, stdout: 'checked data' });
    // Swapped after the check: the directory there now is another one.
    renameSync(join(dir, 'checked'), join(dir, 'moved'));
    mkdirSync(join(dir, 'checked'));
    const swapped = await applied(['/bin/true'], { paths: rule(`${stats.dev}:${stats.ino}`) });
    expect(swapped.code).toBe(126);
    expect(swapped.stderr).toBe(
      `coda-sandbox: landlock applier: ${dir}/checked is not the file that was checked (errno 116)\n`,
    );
  });

  it('leaves a masked path out of a readable tree, and its siblings in', async () => {
    const dir = tempDir();
    mkdirSync(join(dir, 'keys'));
    writeFileSync(join(dir, 'keys', 'private'), 'private key');
    writeFileSync(join(dir, 'public'), 'public');
    const view = [
      { path: '/usr', access: 'read-only' as const, why: '' },
      { path: '/lib', access: 'read-only' as const, why: '' },
      { path: '/lib64', access: 'read-only' as const, why: '' },
      { path: '/bin', access: 'read-only' as const, why: '' },
      { path: dir, access: 'read-only' as const, why: '' },
      { path: join(dir, 'keys'), access: 'masked' as const, why: '' },
    ];
    const paths = filesystemRules(
      view,
      { readOnly: [], writable: [], hidden: [] },
      abi,
      treeHost(hostPaths),
    );
    const result = await applied(['/bin/sh', '-c', `cat ${dir}/public; cat ${dir}/keys/private`], {
      paths,
    });
    expect(result.stdout).toBe('public');
    expect(result.stderr).toContain(`${dir}/keys/private: Permission denied`);
  });

  it('refuses TCP connect and bind with EACCES when the network rules handle TCP', async () => {
    const server = await listening(0);
    const address = `("127.0.0.1", ${server.port})`;
    const open = await applied([python, ...connectScript('AF_INET', address)]);
    expect(open.stdout).toBe('connected\n');
    const refused = await applied([python, ...connectScript('AF_INET', address)], {
      handledNet: 3,
    });
    expect(refused.stdout).toBe('refused 13\n');
    const bind = await applied(
      [
        python,
        '-c',
        'import socket\ntry:\n socket.socket().bind(("127.0.0.1", 0)); print("bound")\nexcept OSError as e: print("refused", e.errno)',
      ],
      { handledNet: 3 },
    );
    expect(bind.stdout).toBe('refused 13\n');
    expect(server.accepted()).toBe(1);
  });

  it('keeps abstract Unix sockets inside the run when scoped (EPERM)', async () => {
    const name = `\0coda-applier-${process.pid}`;
    const server = await listening(name);
    const address = `"\\0coda-applier-${process.pid}"`;
    expect((await applied([python, ...connectScript('AF_UNIX', address)])).stdout).toBe(
      'connected\n',
    );
    const scoped = await applied([python, ...connectScript('AF_UNIX', address)], { scoped: 1 });
    expect(scoped.stdout).toBe('refused 1\n');
    expect(server.accepted()).toBe(1);
  });

  it('refuses signals to processes outside the run when scoped (EPERM)', async () => {
    const victim = spawn('/bin/sleep', ['30'], { stdio: 'ignore' });
    try {
      const scoped = await applied(['/bin/kill', '-TERM', String(victim.pid)], { scoped: 2 });
      expect(scoped.code).toBe(1);
      expect(scoped.stderr).toContain('Operation not permitted');
      expect(victim.exitCode).toBe(null);
      expect(victim.signalCode).toBe(null);
      const unscoped = await applied(['/bin/kill', '-TERM', String(victim.pid)]);
      expect(unscoped.code).toBe(0);
    } finally {
      victim.kill('SIGKILL');
    }
  });

  it('closes its own and inherited descriptors, sets only the given environment and no_new_privs', async () => {
    const dir = tempDir();
    writeFileSync(join(dir, 'inherited'), 'x');
    const { openSync } = await import('node:fs');
    const inherited = openSync(join(dir, 'inherited'), 'r');
    try {
      const result = await applied(
        [
          python,
          '-c',
          'import os\nprint(sorted(int(f) for f in os.listdir("/proc/self/fd"))[:-1])\nprint(dict(os.environ))\nprint([l for l in open("/proc/self/status") if l.startswith(("NoNewPrivs", "Seccomp:"))])',
        ],
        {
          paths: [...system, { path: '/proc', access: read }],
          env: { ONLY: 'this' },
          extraFd: inherited,
        },
      );
      expect(result.stdout).toBe(
        "[0, 1, 2]\n{'ONLY': 'this', 'LC_CTYPE': 'C.UTF-8'}\n['NoNewPrivs:\\t1\\n', 'Seccomp:\\t0\\n']\n",
      );
    } finally {
      closeSync(inherited);
    }
  });

  it('installs the seccomp filter last, before the command', async () => {
    const result = await applied(
      [
        python,
        '-c',
        'import socket\nprint([l for l in open("/proc/self/status") if l.startswith("Seccomp:")])\ntry:\n socket.socket(); print("socket")\nexcept OSError as e: print("refused", e.errno)',
      ],
      { paths: [...system, { path: '/proc', access: read }], seccomp: true },
    );
    expect(result.stdout).toBe("['Seccomp:\\t2\\n']\nrefused 1\n");
  });
});
