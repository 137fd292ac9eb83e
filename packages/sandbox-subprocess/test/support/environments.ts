// Simulated hosts where bubblewrap cannot run, built by the test setup itself (no Docker): the
// escape-probe fixture runs as the host inside each one.
//   moby-root / moby-nonroot: under a seccomp filter refusing namespaces the way moby's default
//     profile does (unshare and setns EPERM, clone with a namespace flag EPERM, clone3 ENOSYS),
//     as root and as uid 65534.
//   old-container: the same, with the Landlock syscalls ENOSYS too (a profile that predates them).
//   rootless: a user namespace with one uid mapped (`unshare -U -r`).
//   rootless-moby: both: a rootless container under moby's profile (uid 0 keeps its uid).
//   userns-disabled: a user namespace whose user.max_user_namespaces is 0, the host a non-root
//     uid (1000) without capabilities.
// Each starts the fixture with descriptors 30 and 200 open on a secret file, as a careless
// parent would leave them.
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import {
  chmodSync,
  closeSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  openSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { bpf, encodeProgram, SeccompData, SeccompRet } from '../../src/linux/seccomp/bpf.ts';
import { aarch64Syscalls } from '../../src/linux/seccomp/syscalls-aarch64.ts';
import { x86_64Syscalls } from '../../src/linux/seccomp/syscalls-x86-64.ts';
import { node } from './helpers.ts';

/** The simulated environments. */
export type Environment =
  | 'rootless-moby'
  | 'moby-root'
  | 'moby-nonroot'
  | 'old-container'
  | 'rootless'
  | 'userns-disabled';

const syscalls = process.arch === 'arm64' ? aarch64Syscalls : x86_64Syscalls;
const EPERM = SeccompRet.errno(1);
const ENOSYS = SeccompRet.errno(38);

/** moby's namespace rules (profiles/seccomp/default.json) for one architecture's table. */
function mobyBlock(
  table: Readonly<Record<string, number>>,
  noLandlock: boolean,
): ReturnType<typeof bpf.ret>[] {
  const block = [bpf.load(SeccompData.nr)];
  const refuse = (nr: number | undefined, ret: number): void => {
    if (nr !== undefined) block.push(bpf.jeq(nr, 0, 1), bpf.ret(ret));
  };
  refuse(table.unshare, EPERM);
  refuse(table.setns, EPERM);
  refuse(table.clone3, ENOSYS);
  if (noLandlock) for (const nr of [444, 445, 446]) refuse(nr, ENOSYS);
  block.push(
    bpf.jeq(table.clone!, 0, 3),
    bpf.load(SeccompData.argLow(0)),
    bpf.jset(0x7e020000, 0, 1),
    bpf.ret(EPERM),
    bpf.ret(SeccompRet.ALLOW),
  );
  return block;
}

/** The filter's bytes: x86_64 and aarch64 blocks, any other architecture allowed. */
export function mobyFilter(noLandlock: boolean): Buffer {
  const x86 = mobyBlock(x86_64Syscalls, noLandlock);
  const arm = mobyBlock(aarch64Syscalls, noLandlock);
  const startX86 = 6;
  const startArm = startX86 + x86.length;
  return encodeProgram([
    bpf.load(SeccompData.arch),
    bpf.jeq(0xc000003e, 0, 1),
    bpf.ja(startX86 - 3),
    bpf.jeq(0xc00000b7, 0, 1),
    bpf.ja(startArm - 5),
    bpf.ret(SeccompRet.ALLOW),
    ...x86,
    ...arm,
  ]);
}

/** Installs the filter given in hex (root: no no_new_privs needed, as in a container), then execs. */
const installFilter = String.raw`
my ($prctl, $hex, @cmd) = @ARGV;
my $prog = pack('H*', $hex);
my $fprog = pack('S x6 Q', length($prog) / 8, unpack('Q', pack('p', $prog)));
syscall($prctl + 0, 22, 2, $fprog, 0, 0) == 0 or die "seccomp: $!\n";
exec { $cmd[0] } @cmd or die "exec: $!\n";
`;

/** A new user namespace mapping uids and gids 0-65535 to the same host ids, then execs. */
const identityNamespace = String.raw`
my ($unshare, @cmd) = @ARGV;
pipe(my $ready, my $toParent) or die; pipe(my $mapped, my $toChild) or die;
my $pid = fork() // die "fork: $!\n";
if ($pid == 0) {
  close $ready; close $toChild;
  syscall($unshare + 0, 0x10000000) == 0 or die "unshare: $!\n";
  syswrite($toParent, 'u'); close $toParent;
  sysread($mapped, my $byte, 1) or die "no map\n";
  exec { $cmd[0] } @cmd or die "exec: $!\n";
}
close $toParent; close $mapped;
sysread($ready, my $byte, 1) or die "child failed\n";
for my $file ('uid_map', 'gid_map') {
  open(my $h, '>', "/proc/$pid/$file") or die "$file: $!\n"; print $h "0 0 65536\n"; close $h or die "$file: $!\n";
}
syswrite($toChild, 'm'); close $toChild;
waitpid($pid, 0); exit($? >> 8);
`;

let nodeCopy: string | undefined;
/** A copy of the test's Node that any uid can run (the original may sit in root's home). */
export function publicNode(): string {
  if (nodeCopy !== undefined) return nodeCopy;
  const dir = join(tmpdir(), `coda-public-node-${process.pid}`);
  mkdirSync(dir, { recursive: true, mode: 0o755 });
  chmodSync(dir, 0o755);
  const copy = join(dir, 'node');
  if (!existsSync(copy)) copyFileSync(node, copy);
  chmodSync(copy, 0o755);
  nodeCopy = copy;
  return copy;
}

const fixture = new URL('../fixtures/escape-probe.ts', import.meta.url).pathname;
const drop = (uid: number): string[] => [
  '/usr/bin/setpriv',
  `--reuid=${uid}`,
  `--regid=${uid}`,
  '--clear-groups',
  '--inh-caps=-all',
  '--bounding-set=-all',
  '--',
];

/** The argv that starts `command` inside `environment`. */
function wrapped(environment: Environment, command: string[]): string[] {
  const filter = (noLandlock: boolean): string[] => [
    '/usr/bin/perl',
    '-e',
    installFilter,
    '--',
    String(syscalls.prctl),
    mobyFilter(noLandlock).toString('hex'),
  ];
  switch (environment) {
    case 'moby-root':
      return [...filter(false), ...command];
    case 'moby-nonroot':
      return [...filter(false), ...drop(65534), ...command];
    case 'old-container':
      return [...filter(true), ...command];
    case 'rootless':
      return ['/usr/bin/unshare', '--user', '--map-root-user', '--', ...command];
    case 'rootless-moby':
      return ['/usr/bin/unshare', '--user', '--map-root-user', '--', ...filter(false), ...command];
    case 'userns-disabled':
      return [
        '/usr/bin/perl',
        '-e',
        identityNamespace,
        '--',
        String(syscalls.unshare),
        '/bin/sh',
        '-c',
        'echo 0 > /proc/sys/user/max_user_namespaces && exec "$@"',
        'sh',
        ...drop(1000),
        ...command,
      ];
  }
}

/** What the fixture reports. */
export interface ProbeReport {
  readonly uid: number;
  readonly fixtureFds: number[];
  readonly capabilities: { confinement?: string; reason?: string };
  readonly confinement: string;
  readonly success: boolean;
  readonly code?: string;
  readonly error?: string;
  readonly controls: string[];
  readonly outcomes: Record<string, { blocked: boolean; stdout: string; stderr: string }>;
  /** What the sandbox logged as warnings. */
  readonly warnings: unknown[][];
}

/** Runs the escape probe in `environment` under `policy`; rejects with its stderr if it fails. */
export async function probeIn(environment: Environment, policy: object = {}): Promise<ProbeReport> {
  return JSON.parse(await nodeIn(environment, [fixture, JSON.stringify(policy)])) as ProbeReport;
}

/**
 * Runs Node (a copy any uid can start, with the `@coda/source` condition) with `args` as the host
 * of `environment`; resolves with its stdout, rejects with its stderr when it exits non-zero.
 */
export async function nodeIn(environment: Environment, args: readonly string[]): Promise<string> {
  const secret = join(tmpdir(), `coda-inherited-${process.pid}`);
  writeFileSync(secret, 'inherited secret', { mode: 0o644 });
  const fd = openSync(secret, 'r');
  const stdio: ('pipe' | 'ignore' | number)[] = ['ignore', 'pipe', 'pipe'];
  for (let index = 3; index <= 200; index++)
    stdio.push(index === 30 || index === 200 ? fd : 'ignore');
  const [file, ...argv] = wrapped(environment, [
    publicNode(),
    '--conditions=@coda/source',
    ...args,
  ]);
  const env = { PATH: '/usr/bin:/bin', CODA_PROBE_SECRET: `coda-probe-${randomUUID()}` };
  const child = spawn(file!, argv, { stdio, env, cwd: '/' });
  closeSync(fd);
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (chunk) => (stdout += chunk));
  child.stderr!.on('data', (chunk) => (stderr += chunk));
  const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
  if (code !== 0) throw new Error(`probe in ${environment} exited ${code}: ${stderr}`);
  return stdout;
}
