// Every claim of the seccomp filter, checked on the real kernel: raw syscalls issued from perl
// (`syscall(NR, args...)`, no compiler needed) inside a real sandbox, one process per run, each
// printing JSON of call -> errno. A control run issues the same calls in a user namespace
// without the filter, then loads the same filter itself and issues them again, so that each
// EPERM can be told apart from the kernel's own answer.
//
// Arguments are chosen so that nothing happens even if the filter failed: each call is invalid
// in a way the kernel checks first (a bad flag, an empty path, a missing pid, fd -1, a NULL
// struct pointer), so without the filter it fails with EINVAL, ENOENT, ESRCH, EBADF, EFAULT or
// ENOSYS instead of acting. The control run shows exactly that: every call fails there too.
import { execFileSync } from 'node:child_process';
import { constants } from 'node:os';
import { beforeAll, describe, expect, it } from 'vitest';
import { createSandbox, SandboxControl, type SandboxResult } from '../src/index.ts';
import { buildSeccompFilter, deniedSyscalls } from '../src/linux/seccomp/filter.ts';
import { aarch64Syscalls } from '../src/linux/seccomp/syscalls-aarch64.ts';
import { x86_64Syscalls } from '../src/linux/seccomp/syscalls-x86-64.ts';
import { python } from './support/helpers.ts';

const perl = '/usr/bin/perl';
const { EPERM, ENOSYS, EINVAL, EBADF } = constants.errno;
const SIGSYS = constants.signals.SIGSYS;
const x86 = process.arch === 'x64';
const table = process.arch === 'arm64' ? aarch64Syscalls : x86_64Syscalls;

function nr(name: string): number {
  const number = table[name];
  if (number === undefined) throw new Error(`no syscall ${name} on ${process.arch}`);
  return number;
}

/** A syscall argument: an integer, a pointer to a NUL-terminated string, or a zeroed buffer. */
type Arg = number | string | { readonly buffer: number };

/** A pid no process has (above the largest pid_max, 2^22). */
const NO_PID = 0x3fffffff;

/**
 * Harmless arguments for every call of the deny list, with what the kernel answers without the
 * filter (seen on Linux 6.18 in a user namespace that holds every capability over its own
 * namespaces). Calls whose kernel code checks a capability of the initial user namespace before
 * anything else are listed in `checksHostCapabilityFirst`.
 */
const denyListArgs: Readonly<Record<string, readonly Arg[]>> = {
  ptrace: [16, NO_PID], // PTRACE_ATTACH to no process: ESRCH
  process_vm_readv: [NO_PID, 0, 0, 0, 0, 1], // flags must be 0: EINVAL
  process_vm_writev: [NO_PID, 0, 0, 0, 0, 1], // EINVAL
  process_madvise: [-1, 0, 0, 0, 1], // flags must be 0: EINVAL
  pidfd_getfd: [-1, 0, 1], // flags must be 0: EINVAL
  kcmp: [NO_PID, NO_PID, 0, 0, 0], // ESRCH
  mount: ['none', '', 'coda-no-such-fs', 0, 0], // empty target path: ENOENT
  umount2: ['', 0x80000000], // unknown flag: EINVAL
  pivot_root: ['', ''], // ENOENT
  chroot: [''], // ENOENT
  open_tree: [-1, '', 0xffffffff], // unknown flags: EINVAL
  open_tree_attr: [-1, '', 0xffffffff, 0, 0], // EINVAL
  move_mount: [-1, '', -1, '', 0xffffffff], // EINVAL
  fsopen: ['coda-no-such-fs', 0xffffffff], // EINVAL
  fsconfig: [-1, 0xffff, 0, 0, 0], // unknown command: EINVAL
  fsmount: [-1, 0xffffffff, 0], // EINVAL
  fspick: [-1, '', 0xffffffff], // EINVAL
  mount_setattr: [-1, '', 0xffffffff, 0, 0], // EINVAL
  unshare: [0x1], // a CSIGNAL bit, no namespace: EINVAL
  setns: [-1, 0], // EBADF
  bpf: [9999, 0, 0], // unknown command: EINVAL
  perf_event_open: [0, 0, -1, -1, 0], // NULL attr: EFAULT
  keyctl: [9999, 0, 0, 0, 0], // unknown command: EOPNOTSUPP
  add_key: ['', '', 0, 0, 0], // empty key type: EINVAL
  request_key: ['', '', 0, 0], // EINVAL
  kexec_load: [0, 0, 0, 0x80], // unknown flag (flags 0 with no segments would unload): EINVAL
  kexec_file_load: [-1, -1, 0, 0, 0x80000000], // unknown flag: EINVAL
  init_module: [0, 0, ''], // empty image: ENOEXEC
  finit_module: [-1, '', 0xffffffff], // EINVAL
  delete_module: ['coda-no-such-module', 0x800], // ENOENT
  create_module: ['', 0], // removed from Linux: ENOSYS
  userfaultfd: [0x101], // UFFD_USER_MODE_ONLY plus an unknown flag: EINVAL
  io_uring_setup: [0, 0], // NULL params: EFAULT
  io_uring_enter: [-1, 0, 0, 0, 0, 0], // EBADF
  io_uring_register: [-1, 0, 0, 0], // EBADF
  reboot: [0, 0, 0, 0], // wrong magic numbers: EINVAL
  swapon: ['', 0], // ENOENT
  swapoff: [''], // ENOENT
  acct: [''], // ENOENT (NULL would switch accounting off)
  clock_settime: [0x7fff, 0], // no such clock: EINVAL
  clock_adjtime: [0x7fff, 0], // EINVAL or EFAULT
  settimeofday: [0, 1], // no time, a bad timezone pointer: EFAULT (NULL, NULL would succeed)
  adjtimex: [0], // NULL: EFAULT
  ioperm: [0, 0, 0], // no ports
  iopl: [4], // levels are 0-3: EINVAL
  open_by_handle_at: [-1, 0, 0], // NULL handle: EFAULT
  name_to_handle_at: [-1, '', 0, 0, 0xffffffff], // unknown flags: EINVAL
  quotactl: [0, 0, 0, 0], // no device: ENODEV
  quotactl_fd: [-1, 0, 0, 0], // EBADF
  syslog: [3, 0, -1], // read all into NULL: EINVAL
  lookup_dcookie: [0, 0, 0], // removed from Linux: ENOSYS
  nfsservctl: [0, 0, 0], // removed: ENOSYS
  vhangup: [], // the sandbox has no controlling terminal (new session): nothing to hang up
  uselib: [''], // ENOENT, or ENOSYS without CONFIG_USELIB
  ustat: [0, 0], // no such device: EINVAL
  sysfs: [9999], // unknown option: EINVAL
  _sysctl: [0], // removed: ENOSYS
  get_kernel_syms: [0], // removed: ENOSYS
  query_module: ['', 0, 0, 0, 0], // removed: ENOSYS
  fanotify_init: [0x200, 0x7fffffff], // FAN_REPORT_FID, unknown event flags: EINVAL
  lsm_set_self_attr: [0, 0, 0, 1], // flags must be 0: EINVAL
};

/**
 * Calls whose kernel code checks a capability of the host's (initial) user namespace before it
 * looks at any argument (syslog: when kernel.dmesg_restrict is 1). No sandboxed process holds
 * one, so the kernel answers EPERM too: for these the EPERM seen here cannot be told apart
 * from the filter's, and only the BPF emulator (filter.test.ts) shows the filter refuses them.
 */
const checksHostCapabilityFirst = new Set([
  'swapon',
  'swapoff',
  'acct',
  'syslog',
  'vhangup',
  // Where the kernel has them: CAP_SYS_BOOT and CAP_SYS_MODULE come before the arguments.
  'kexec_load',
  'kexec_file_load',
  'init_module',
  'finit_module',
  'delete_module',
]);

/** Deny-listed calls this architecture has, in the filter's order. */
const denied = deniedSyscalls.filter((name) => table[name] !== undefined);

const CLONE_SIGHAND = 0x800;
const namespaceFlags = {
  CLONE_NEWNS: 0x20000,
  CLONE_NEWCGROUP: 0x02000000,
  CLONE_NEWUTS: 0x04000000,
  CLONE_NEWIPC: 0x08000000,
  CLONE_NEWUSER: 0x10000000,
  CLONE_NEWPID: 0x20000000,
  CLONE_NEWNET: 0x40000000,
};
const TCGETS = 0x5401;
const TIOCSTI = 0x5412;
const TIOCLINUX = 0x541c;
const AF_UNIX = 1;
const SOCK_STREAM = 1;
const SOCK_RAW = 3;
/** Not a socket type (SOCK_MAX is 11): the kernel refuses it before it looks at the family. */
const BAD_TYPE = 15;
const refusedFamilies = { AF_INET: 2, AF_INET6: 10, AF_NETLINK: 16, AF_PACKET: 17, AF_VSOCK: 40 };

/** One call of the probe script: its result is the errno, or 'ok' when it returned >= 0. */
interface Probe {
  readonly call: string;
  readonly args: readonly Arg[];
  /** The call returns a descriptor to close. */
  readonly fd?: boolean;
}

/** The argument rules: clone, clone3, ioctl, socket, socketpair, each next to a control. */
const ruleProbes: Readonly<Record<string, Probe>> = {
  // CLONE_SIGHAND without CLONE_VM is EINVAL before the kernel creates anything, so a clone
  // the filter let through comes back EINVAL, and no process is made even if it failed.
  'clone without namespace flags': { call: 'clone', args: [CLONE_SIGHAND, 0, 0, 0, 0] },
  ...Object.fromEntries(
    Object.entries(namespaceFlags).map(([flag, bit]) => [
      `clone ${flag}`,
      { call: 'clone', args: [bit | CLONE_SIGHAND, 0, 0, 0, 0] },
    ]),
  ),
  // A size of 0 is EINVAL without the filter; the filter answers ENOSYS (libc falls back).
  clone3: { call: 'clone3', args: [0, 0] },
  // fd -1: EBADF if the call reached the kernel; the filter looks only at the request.
  'ioctl TCGETS': { call: 'ioctl', args: [-1, TCGETS, 0] },
  'ioctl TIOCSTI': { call: 'ioctl', args: [-1, TIOCSTI, 0] },
  'ioctl TIOCLINUX': { call: 'ioctl', args: [-1, TIOCLINUX, 0] },
  // The kernel takes the request as an unsigned int: high bits set are still TIOCSTI.
  'ioctl TIOCSTI high bits': { call: 'ioctl', args: [-1, 2 ** 32 + TIOCSTI, 0] },
  'socket AF_UNIX': { call: 'socket', args: [AF_UNIX, SOCK_STREAM, 0], fd: true },
  'socket AF_UNIX bad type': { call: 'socket', args: [AF_UNIX, BAD_TYPE, 0] },
  'socketpair AF_UNIX': { call: 'socketpair', args: [AF_UNIX, SOCK_STREAM, 0, { buffer: 8 }] },
  ...Object.fromEntries(
    Object.entries(refusedFamilies).flatMap(([name, family]) => [
      [
        `socket ${name}`,
        {
          call: 'socket',
          args: [family, name === 'AF_NETLINK' || name === 'AF_PACKET' ? SOCK_RAW : SOCK_STREAM, 0],
          fd: true,
        },
      ],
      // Refused by the filter, EINVAL from the kernel: tells the filter's EPERM apart from a
      // missing capability (AF_PACKET) or protocol (AF_VSOCK).
      [`socket ${name} bad type`, { call: 'socket', args: [family, BAD_TYPE, 0] }],
    ]),
  ),
  // The kernel takes the family as an int: 2^32 + AF_INET is AF_INET.
  'socket AF_INET high bits': { call: 'socket', args: [2 ** 32 + 2, SOCK_STREAM, 0], fd: true },
};

type Results = Record<string, number | 'ok'>;

function perlArg(arg: Arg): string {
  if (typeof arg === 'number') return arg < 0 ? String(arg) : `0x${arg.toString(16)}`;
  if (typeof arg === 'string') {
    if (!/^[\w-]*$/.test(arg)) throw new Error(`unsafe string argument ${arg}`);
    return `'${arg}'`;
  }
  return `"\\0" x ${arg.buffer}`;
}

/**
 * A perl sub `probe` returning the JSON of every probe, plus a fork check. Each probe is
 * `[key, nr, close_fd, args...]`; a failed call (-1) gives `$!` as a number.
 */
function probeSub(probes: Readonly<Record<string, Probe>>): string {
  const rows = Object.entries(probes).map(
    ([key, probe]) =>
      `['${key}', ${nr(probe.call)}, ${probe.fd === true ? 1 : 0}, ${probe.args.map(perlArg).join(', ')}]`,
  );
  return `sub probe {
  my @out;
  for my $c (${rows.join(',\n    ')}) {
    my ($key, $nr, $fd, @args) = @$c;
    $! = 0;
    my $r = syscall($nr, @args);
    syscall(${nr('close')}, $r) if $fd && $r >= 0;
    push @out, sprintf('"%s":%s', $key, $r == -1 ? $! + 0 : '"ok"');
  }
  # An ordinary fork (clone without namespace flags) still works.
  my $pid = fork();
  syscall(${nr('exit_group')}, 0) if defined $pid && $pid == 0;
  my $forked = defined $pid && waitpid($pid, 0) == $pid && $? == 0;
  push @out, sprintf('"fork":%s', $forked ? '"ok"' : $! + 0);
  return '{' . join(',', @out) . '}';
}
`;
}

const denyProbes: Readonly<Record<string, Probe>> = Object.fromEntries(
  denied.map((name) => [name, { call: name, args: denyListArgs[name] ?? [] }]),
);
const allProbes = { ...denyProbes, ...ruleProbes };
const probeScript = `$| = 1;\n${probeSub(allProbes)}print probe(), "\\n";\n`;

const pick = (results: Results, keys: readonly string[]): Results =>
  Object.fromEntries(keys.map((key) => [key, results[key]!]));
const all = (keys: readonly string[], value: number | 'ok'): Results =>
  Object.fromEntries(keys.map((key) => [key, value]));
const familyKeys = Object.keys(refusedFamilies).flatMap((name) => [
  `socket ${name}`,
  `socket ${name} bad type`,
]);

async function runProbes(allowNetwork: boolean): Promise<Results> {
  const result = await createSandbox({ allowNetwork }).run(perl, ['-e', probeScript]);
  expect(result.stderr).toBe('');
  expect(result.exitCode).toBe(0);
  expect(result.controls).toContain(SandboxControl.seccomp);
  return JSON.parse(result.stdout) as Results;
}

/** The process was killed by SIGSYS (bubblewrap reports a signalled child as 128 + signal). */
function killedBySigsys(result: SandboxResult): boolean {
  return result.signal === 'SIGSYS' || result.exitCode === 128 + SIGSYS;
}

describe('seccomp filter in a real sandbox, network off', () => {
  let results: Results;
  beforeAll(async () => {
    results = await runProbes(false);
  });

  it('has harmless arguments for every call of the deny list', () => {
    expect(denied.filter((name) => !Object.hasOwn(denyListArgs, name))).toEqual([]);
    expect(denied.length).toBeGreaterThan(50);
  });

  it('refuses every call of the deny list this architecture has with EPERM', () => {
    expect(pick(results, denied)).toEqual(all(denied, EPERM));
  });

  it('refuses clone with each namespace flag, and lets other clones reach the kernel', () => {
    const keys = Object.keys(namespaceFlags).map((flag) => `clone ${flag}`);
    expect(pick(results, keys)).toEqual(all(keys, EPERM));
    expect(results['clone without namespace flags']).toBe(EINVAL);
    expect(results.fork).toBe('ok');
  });

  it('answers clone3 with ENOSYS', () => {
    expect(results.clone3).toBe(ENOSYS);
  });

  it('refuses TIOCSTI and TIOCLINUX, and lets other ioctls reach the kernel', () => {
    expect(
      pick(results, [
        'ioctl TIOCSTI',
        'ioctl TIOCLINUX',
        'ioctl TIOCSTI high bits',
        'ioctl TCGETS',
      ]),
    ).toEqual({
      'ioctl TIOCSTI': EPERM,
      'ioctl TIOCLINUX': EPERM,
      'ioctl TIOCSTI high bits': EPERM,
      'ioctl TCGETS': EBADF,
    });
  });

  it('refuses every socket family but AF_UNIX; AF_UNIX sockets and socketpair work', () => {
    expect(pick(results, familyKeys)).toEqual(all(familyKeys, EPERM));
    expect(results['socket AF_INET high bits']).toBe(EPERM);
    expect(results['socket AF_UNIX']).toBe('ok');
    expect(results['socket AF_UNIX bad type']).toBe(EINVAL);
    expect(results['socketpair AF_UNIX']).toBe('ok');
  });
});

describe('seccomp filter in a real sandbox, network on', () => {
  it('still refuses AF_VSOCK and the deny list, and allows the other families', async () => {
    const results = await runProbes(true);
    expect(pick(results, denied)).toEqual(all(denied, EPERM));
    expect(pick(results, ['socket AF_VSOCK', 'socket AF_VSOCK bad type'])).toEqual({
      'socket AF_VSOCK': EPERM,
      'socket AF_VSOCK bad type': EPERM,
    });
    expect(
      pick(results, ['socket AF_INET', 'socket AF_INET high bits', 'socket AF_NETLINK']),
    ).toEqual({
      'socket AF_INET': 'ok',
      'socket AF_INET high bits': 'ok',
      'socket AF_NETLINK': 'ok',
    });
    for (const name of ['AF_INET', 'AF_INET6', 'AF_NETLINK', 'AF_PACKET']) {
      expect(results[`socket ${name} bad type`], name).toBe(EINVAL);
    }
    expect(results['socket AF_INET6']).not.toBe(EPERM);
    expect(results['socketpair AF_UNIX']).toBe('ok');
  });
});

describe('seccomp filter: other ABIs', () => {
  // getpid through the x32 ABI (nr | 0x40000000). Without the filter: ENOSYS on a kernel built
  // without CONFIG_X86_X32_ABI, the pid with it; never a kill.
  const x32 = `$| = 1; print "before\\n"; my $r = syscall(${0x40000000 + 39}); print "after ", $r == -1 ? $! + 0 : "ok", "\\n";`;

  it.runIf(x86)('kills a process that makes an x32 call', async () => {
    const control = execFileSync(perl, ['-e', x32], { encoding: 'utf8' });
    expect(control).toMatch(/^before\nafter (38|ok)\n$/);
    const result = await createSandbox().run(perl, ['-e', x32]);
    expect(result.stdout).toBe('before\n');
    expect(killedBySigsys(result), JSON.stringify(result)).toBe(true);
  });

  // No compiler needed: python3's ctypes runs three hand-assembled instructions from an
  // executable page (perl cannot jump to code it wrote). int 0x80 is the i386 entry, which
  // seccomp sees as AUDIT_ARCH_I386: an architecture the filter does not know.
  const i386 = [
    'import ctypes, mmap',
    '# mov eax, 20 (getpid in the i386 table); int 0x80; ret',
    'code = bytes([0xB8, 0x14, 0x00, 0x00, 0x00, 0xCD, 0x80, 0xC3])',
    'page = mmap.mmap(-1, mmap.PAGESIZE, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)',
    'page.write(code)',
    'call = ctypes.CFUNCTYPE(ctypes.c_int)(ctypes.addressof(ctypes.c_char.from_buffer(page)))',
    'print("before", flush=True)',
    'print("after", call() > 0, flush=True)',
  ].join('\n');

  it.runIf(x86)('kills a process that makes an i386 call (int 0x80)', async () => {
    // Without the filter the i386 getpid returns the pid: the kill below is the filter's.
    expect(execFileSync(python, ['-c', i386], { encoding: 'utf8' })).toBe('before\nafter True\n');
    const result = await createSandbox().run(python, ['-c', i386]);
    expect(result.stdout).toBe('before\n');
    expect(killedBySigsys(result), JSON.stringify(result)).toBe(true);
  });
});

describe('seccomp filter: the same calls without it, then with it', () => {
  // In a fresh user namespace (with its own mount, pid, net, ipc and uts namespaces), perl
  // first issues every probe unfiltered, holding every capability over those namespaces and
  // none over the host's; then it loads the package's filter itself (seccomp(2), as bwrap
  // does) and issues them again.
  const program = buildSeccompFilter({ allowNetwork: false });
  const control = `$| = 1;
syscall(${nr('setsid')}); # no controlling terminal: vhangup has nothing to hang up
${probeSub(allProbes)}
print probe(), "\\n";
my $filter = pack('H*', $ARGV[0]);
my $fprog = pack('S x![p] p', length($filter) / 8, $filter);
syscall(${nr('prctl')}, 38, 1, 0, 0, 0) == 0 or die "PR_SET_NO_NEW_PRIVS: $!";
syscall(${nr('seccomp')}, 1, 0, $fprog) == 0 or die "SECCOMP_SET_MODE_FILTER: $!";
print probe(), "\\n";
`;
  let without: Results;
  let filtered: Results;
  beforeAll(() => {
    const namespaces = ['--user', '--map-root-user', '--mount', '--pid', '--fork'];
    const out = execFileSync(
      'unshare',
      [...namespaces, '--net', '--ipc', '--uts', perl, '-e', control, program.toString('hex')],
      { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], timeout: 10_000 },
    );
    [without, filtered] = out
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as Results) as [Results, Results];
  });

  it('without the filter every deny-listed call fails harmlessly, mostly not with EPERM', () => {
    const succeeded = denied.filter((name) => without[name] === 'ok');
    expect(succeeded).toEqual([]);
    const kernelEperm = denied.filter((name) => without[name] === EPERM);
    expect(kernelEperm.filter((name) => !checksHostCapabilityFirst.has(name))).toEqual([]);
  });

  it('with the filter the same process gets EPERM for each of them', () => {
    expect(pick(filtered, denied)).toEqual(all(denied, EPERM));
  });

  it('the argument rules change the kernel answer exactly where they claim', () => {
    const namespaceKeys = Object.keys(namespaceFlags).map((flag) => `clone ${flag}`);
    expect(pick(without, namespaceKeys)).toEqual(all(namespaceKeys, EINVAL));
    expect(pick(filtered, namespaceKeys)).toEqual(all(namespaceKeys, EPERM));
    expect([without.clone3, filtered.clone3]).toEqual([EINVAL, ENOSYS]);
    const ioctls = ['ioctl TIOCSTI', 'ioctl TIOCLINUX', 'ioctl TIOCSTI high bits'];
    expect(pick(without, ioctls)).toEqual(all(ioctls, EBADF));
    expect(pick(filtered, ioctls)).toEqual(all(ioctls, EPERM));
    const badTypes = Object.keys(refusedFamilies).map((name) => `socket ${name} bad type`);
    expect(pick(without, badTypes)).toEqual(all(badTypes, EINVAL));
    expect(pick(filtered, familyKeys)).toEqual(all(familyKeys, EPERM));
    for (const name of ['AF_INET', 'AF_INET6', 'AF_NETLINK', 'AF_PACKET']) {
      expect(without[`socket ${name}`], name).toBe('ok');
    }
    for (const results of [without, filtered]) {
      expect(results['ioctl TCGETS']).toBe(EBADF);
      expect(results['clone without namespace flags']).toBe(EINVAL);
      expect(results['socket AF_UNIX']).toBe('ok');
      expect(results['socketpair AF_UNIX']).toBe('ok');
      expect(results.fork).toBe('ok');
    }
  });
});
