// Every claim of the seccomp filter, checked on the real kernel: raw syscalls issued from perl
// (`syscall(NR, args...)`, no compiler needed), one process per run, each printing JSON of
// call -> errno. Each probe's expected answer is written in the tables below, from the kernel's
// behaviour and the issue's rules, never from the filter's own data: what the kernel answers
// without the filter (`without`, seen on Linux 6.18 in a user namespace), and what a run gets
// under it with the network off (`off`) and on (`on`, when it differs).
//
// Without the filter, a control run issues the same calls in a user namespace (holding every
// capability over its own namespaces), then loads the package's filter itself and issues them
// again; a real sandbox run issues them too. Arguments are chosen so that nothing happens even
// if the filter failed: each call is invalid in a way the kernel checks first (a bad flag, an
// empty path, a missing pid, fd -1, a NULL pointer), so unfiltered it fails with EINVAL,
// ENOENT, ESRCH, EBADF, EFAULT or ENOSYS instead of acting, and that answer differs from the
// filter's EPERM.
import { execFileSync, spawnSync } from 'node:child_process';
import { constants } from 'node:os';
import { beforeAll, describe, expect, it } from 'vitest';
import { createSandbox, SandboxControl, type SandboxResult } from '../src/index.ts';
import { buildSeccompFilter } from '../src/linux/seccomp/filter.ts';
import { aarch64Syscalls } from '../src/linux/seccomp/syscalls-aarch64.ts';
import { x86_64Syscalls } from '../src/linux/seccomp/syscalls-x86-64.ts';
import { python } from './support/helpers.ts';

const perl = '/usr/bin/perl';
const e = constants.errno;
const { EPERM, ENOSYS } = e;
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
/** A probe's answer: the errno, or 'ok' when the call returned >= 0. */
type Outcome = number | 'ok';

/** One call, its arguments and its expected answers. */
interface Probe {
  readonly call: string;
  readonly args: readonly Arg[];
  /** The call returns a descriptor to close. */
  readonly fd?: boolean;
  /** The kernel's answer without the filter. */
  readonly without: Outcome;
  /** Under the filter, network off. */
  readonly off: Outcome;
  /** Under the filter, network on (default: as `off`). */
  readonly on?: Outcome;
}

/** A pid no process has (above the largest pid_max, 2^22). */
const NO_PID = 0x3fffffff;

/**
 * Refused by the filter with EPERM in every mode: calls no sandboxed command needs, the kernel's
 * answer without it beside each. EPERM in `without` marks a call whose kernel code checks a
 * capability of the host's user namespace before any argument: there the kernel's EPERM and the
 * filter's cannot be told apart on the kernel, and the BPF emulator (filter.test.ts) shows it.
 */
const refused: Readonly<Record<string, readonly [args: readonly Arg[], without: Outcome]>> = {
  ptrace: [[16, NO_PID], e.ESRCH], // PTRACE_ATTACH to no process
  process_vm_readv: [[NO_PID, 0, 0, 0, 0, 1], e.EINVAL], // flags must be 0
  process_vm_writev: [[NO_PID, 0, 0, 0, 0, 1], e.EINVAL],
  process_madvise: [[-1, 0, 0, 0, 1], e.EINVAL],
  process_mrelease: [[-1, 1], e.EINVAL], // flags must be 0
  pidfd_getfd: [[-1, 0, 1], e.EINVAL],
  kcmp: [[NO_PID, NO_PID, 0, 0, 0], e.ESRCH],
  mount: [['none', '', 'coda-no-such-fs', 0, 0], e.ENOENT], // empty target path
  umount2: [['', 0x80000000], e.EINVAL], // unknown flag
  pivot_root: [['', ''], e.ENOENT],
  chroot: [[''], e.ENOENT],
  open_tree: [[-1, '', 0xffffffff], e.EINVAL],
  open_tree_attr: [[-1, '', 0xffffffff, 0, 0], e.EINVAL],
  move_mount: [[-1, '', -1, '', 0xffffffff], e.EINVAL],
  fsopen: [['coda-no-such-fs', 0xffffffff], e.EINVAL],
  fsconfig: [[-1, 0xffff, 0, 0, 0], e.EINVAL],
  fsmount: [[-1, 0xffffffff, 0], e.EINVAL],
  fspick: [[-1, '', 0xffffffff], e.EINVAL],
  mount_setattr: [[-1, '', 0xffffffff, 0, 0], e.EINVAL],
  statmount: [[0, 0, 0, 0xffffffff], e.EINVAL],
  listmount: [[0, 0, 0, 0xffffffff], e.EINVAL],
  unshare: [[0x1], e.EINVAL], // a CSIGNAL bit, no namespace
  setns: [[-1, 0], e.EBADF],
  bpf: [[9999, 0, 0], e.EINVAL],
  perf_event_open: [[0, 0, -1, -1, 0], e.EFAULT],
  keyctl: [[9999, 0, 0, 0, 0], e.EOPNOTSUPP],
  add_key: [['', '', 0, 0, 0], e.EINVAL],
  request_key: [['', '', 0, 0], e.EINVAL],
  kexec_load: [[0, 0, 0, 0x80], ENOSYS], // a kernel without kexec (else CAP_SYS_BOOT first)
  kexec_file_load: [[-1, -1, 0, 0, 0x80000000], ENOSYS],
  init_module: [[0, 0, ''], ENOSYS], // a kernel without modules (else CAP_SYS_MODULE first)
  finit_module: [[-1, '', 0xffffffff], ENOSYS],
  delete_module: [['coda-no-such-module', 0x800], ENOSYS],
  userfaultfd: [[0x101], e.EINVAL], // UFFD_USER_MODE_ONLY plus an unknown flag
  reboot: [[0, 0, 0, 0], e.EINVAL], // wrong magic numbers
  swapon: [['', 0], EPERM], // CAP_SYS_ADMIN first
  swapoff: [[''], EPERM],
  acct: [[''], EPERM], // CAP_SYS_PACCT first (NULL would switch accounting off)
  clock_settime: [[0x7fff, 0], e.EINVAL], // no such clock
  clock_adjtime: [[0x7fff, 0], e.EFAULT], // NULL timex, read before the clock id
  settimeofday: [[0, 1], e.EFAULT], // a bad timezone pointer (NULL, NULL would succeed)
  adjtimex: [[0], e.EFAULT],
  name_to_handle_at: [[-1, '', 0, 0, 0xffffffff], e.EINVAL],
  open_by_handle_at: [[-1, 0, 0], e.EFAULT], // NULL handle
  quotactl: [[0, 0, 0, 0], e.ENODEV],
  quotactl_fd: [[-1, 0, 0, 0], e.EBADF],
  syslog: [[3, 0, -1], EPERM], // kernel.dmesg_restrict: CAP_SYSLOG first
  vhangup: [[], EPERM], // CAP_SYS_TTY_CONFIG first
  sysfs: [[9999], e.EINVAL],
  fanotify_init: [[0x200, 0x7fffffff], e.EINVAL],
  fanotify_mark: [[-1, 0, 0, -1, 0], e.EINVAL],
  lsm_set_self_attr: [[0, 0, 0, 1], e.EINVAL],
  cachestat: [[-1, 0, 0, 0], e.EBADF],
  memfd_secret: [[0xffffffff], e.EINVAL],
  mlockall: [[0], e.EINVAL], // no flag
  remap_file_pages: [[0, 0, 0, 0, 0xffffffff], e.EINVAL],
  sched_setattr: [[NO_PID, 0, 0], e.EINVAL], // NULL attr
  sched_setscheduler: [[NO_PID, 0, 0], e.EINVAL],
  sched_setparam: [[NO_PID, 0], e.EINVAL],
  ioprio_set: [[99, 0, 0], e.EINVAL], // unknown "which"
  io_setup: [[0, 0], e.EFAULT],
  io_destroy: [[0], e.EINVAL],
  io_submit: [[0, -1, 0], e.EINVAL],
  io_getevents: [[0, 0, 0, 0, 0], e.EINVAL],
  mbind: [[0, 0, 99, 0, 0, 0], e.EINVAL], // unknown mode
  set_mempolicy: [[99, 0, 0], e.EINVAL],
  get_mempolicy: [[0, 0, 0, 0, 0xffff], e.EINVAL],
  migrate_pages: [[NO_PID, 0, 0, 0], e.ESRCH],
  move_pages: [[NO_PID, 0, 0, 0, 0, 0], e.ESRCH],
  sethostname: [['', 0x7fffffff], e.EINVAL], // too long
  setdomainname: [['', 0x7fffffff], e.EINVAL],
  ...(x86
    ? {
        ioperm: [[0, 0, 0], ENOSYS] as const, // a kernel without port I/O
        iopl: [[4], ENOSYS] as const,
        modify_ldt: [[0, 0, 0], 'ok'] as const, // reads no bytes of the LDT
        set_thread_area: [[0], ENOSYS] as const, // no IA32 emulation
        get_thread_area: [[0], ENOSYS] as const,
        create_module: [['', 0], ENOSYS] as const, // removed from Linux
        _sysctl: [[0], ENOSYS] as const,
        get_kernel_syms: [[0], ENOSYS] as const,
        query_module: [['', 0, 0, 0, 0], ENOSYS] as const,
        nfsservctl: [[0, 0, 0], ENOSYS] as const,
        uselib: [[''], ENOSYS] as const, // no CONFIG_USELIB
        ustat: [[0, 0], e.EINVAL] as const,
      }
    : {}),
};

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
const TIOCSETD = 0x5423;
const AF_UNIX = 1;
const SOCK_STREAM = 1;
const SOCK_RAW = 3;
/** Not a socket type (SOCK_MAX is 11): the kernel refuses it before it looks at the family. */
const BAD_TYPE = 15;
const O_CREAT = 0o100;
const S_IFCHR = 0o020000;
const S_IFBLK = 0o060000;
const S_IFIFO = 0o010000;

/** Calls allowed for some arguments and refused for others, each next to its kernel answer. */
const ruled: Readonly<Record<string, Probe>> = {
  // CLONE_SIGHAND without CLONE_VM is EINVAL before the kernel creates anything, so a clone
  // the filter let through comes back EINVAL, and no process is made even if it failed.
  'clone without namespace flags': {
    call: 'clone',
    args: [CLONE_SIGHAND, 0, 0, 0, 0],
    without: e.EINVAL,
    off: e.EINVAL,
  },
  ...Object.fromEntries(
    Object.entries(namespaceFlags).map(([flag, bit]) => [
      `clone ${flag}`,
      { call: 'clone', args: [bit | CLONE_SIGHAND, 0, 0, 0, 0], without: e.EINVAL, off: EPERM },
    ]),
  ),
  // The ENOSYS answers: programs fall back to clone, openat and threads.
  clone3: { call: 'clone3', args: [0, 0], without: e.EINVAL, off: ENOSYS },
  openat2: { call: 'openat2', args: [-1, '', 0, 0], without: e.EINVAL, off: ENOSYS },
  io_uring_setup: { call: 'io_uring_setup', args: [0, 0], without: e.EFAULT, off: ENOSYS },
  io_uring_enter: {
    call: 'io_uring_enter',
    args: [-1, 0, 0, 0, 0, 0],
    without: e.EBADF,
    off: ENOSYS,
  },
  // madvise: MADV_MERGEABLE (12) opts a range into KSM, which merges equal pages across
  // processes, other runs' included (the side channel PR_SET_MEMORY_MERGE is refused for; stop
  // 36's attack review). An empty range is 'ok' when the call reaches the kernel; refused, it is
  // EINVAL, what a kernel without KSM answers.
  'madvise MADV_DONTNEED': { call: 'madvise', args: [0, 0, 4], without: 'ok', off: 'ok' },
  'madvise MADV_MERGEABLE': { call: 'madvise', args: [0, 0, 12], without: 'ok', off: e.EINVAL },
  // preadv2: fd -1 is EBADF if the call reached the kernel; RWF_NOWAIT (0x8) never does
  // (page-cache side channel, stop 36's attack review), refused as a file that lacks it.
  'preadv2 no flags': {
    call: 'preadv2',
    args: [-1, 0, 0, 0, 0, 0],
    without: e.EBADF,
    off: e.EBADF,
  },
  'preadv2 RWF_NOWAIT': {
    call: 'preadv2',
    args: [-1, 0, 0, 0, 0, 0x8],
    without: e.EBADF,
    off: e.EOPNOTSUPP,
  },
  // fd -1: EBADF if the call reached the kernel; the filter looks only at the request.
  'ioctl TCGETS': { call: 'ioctl', args: [-1, TCGETS, 0], without: e.EBADF, off: e.EBADF },
  // Requests outside the allowlist: ENOTTY, as from a file without them.
  'ioctl TIOCSTI': { call: 'ioctl', args: [-1, TIOCSTI, 0], without: e.EBADF, off: e.ENOTTY },
  'ioctl TIOCLINUX': {
    call: 'ioctl',
    args: [-1, TIOCLINUX, 0],
    without: e.EBADF,
    off: e.ENOTTY,
  },
  'ioctl TIOCSETD': { call: 'ioctl', args: [-1, TIOCSETD, 0], without: e.EBADF, off: e.ENOTTY },
  // The kernel takes the request as an unsigned int: high bits set are still TIOCSTI.
  'ioctl TIOCSTI high bits': {
    call: 'ioctl',
    args: [-1, 2 ** 32 + TIOCSTI, 0],
    without: e.EBADF,
    off: e.ENOTTY,
  },
  // personality: the query and PER_LINUX pass; ADDR_NO_RANDOMIZE and READ_IMPLIES_EXEC do not
  // (unfiltered they succeed, changing only how the probe would exec: it never does).
  'personality query': { call: 'personality', args: [0xffffffff], without: 'ok', off: 'ok' },
  'personality ADDR_NO_RANDOMIZE': {
    call: 'personality',
    args: [0x0040000],
    without: 'ok',
    off: EPERM,
  },
  'personality READ_IMPLIES_EXEC': {
    call: 'personality',
    args: [0x0400000],
    without: 'ok',
    off: EPERM,
  },
  'personality PER_LINUX': { call: 'personality', args: [0], without: 'ok', off: 'ok' },
  // prctl: allowed options reach the kernel; refused ones get EPERM where the kernel says EINVAL.
  'prctl PR_GET_DUMPABLE': { call: 'prctl', args: [3, 0, 0, 0, 0], without: 'ok', off: 'ok' },
  'prctl PR_SET_NAME bad pointer': {
    call: 'prctl',
    args: [15, 1, 0, 0, 0],
    without: e.EFAULT,
    off: e.EFAULT,
  },
  'prctl PR_SET_SPECULATION_CTRL': {
    call: 'prctl',
    args: [53, 99, 0, 0, 0],
    without: e.ENODEV,
    off: EPERM,
  },
  'prctl PR_SET_SYSCALL_USER_DISPATCH': {
    call: 'prctl',
    args: [59, 99, 0, 0, 0],
    without: e.EINVAL,
    off: EPERM,
  },
  'prctl PR_SCHED_CORE': { call: 'prctl', args: [62, 99, 0, 0, 0], without: e.EINVAL, off: EPERM },
  'prctl PR_SET_MEMORY_MERGE': {
    call: 'prctl',
    args: [67, 0, 1, 0, 0], // arg3 must be 0: EINVAL before KSM is touched
    without: e.EINVAL,
    off: EPERM,
  },
  'prctl PR_SET_PTRACER': {
    call: 'prctl',
    args: [0x59616d61, NO_PID, 0, 0, 0],
    without: e.EINVAL,
    off: EPERM,
  },
  'prctl unknown option': {
    call: 'prctl',
    args: [0x7fff, 0, 0, 0, 0],
    without: e.EINVAL,
    off: EPERM,
  },
  // Set-id bits and device nodes: an empty path is ENOENT, fd -1 EBADF, before anything happens.
  'chmod 0755': { call: 'chmod', args: ['', 0o755], without: e.ENOENT, off: e.ENOENT },
  'chmod 04755': { call: 'chmod', args: ['', 0o4755], without: e.ENOENT, off: EPERM },
  'chmod 02755': { call: 'chmod', args: ['', 0o2755], without: e.ENOENT, off: EPERM },
  'fchmod 01777': { call: 'fchmod', args: [-1, 0o1777], without: e.EBADF, off: e.EBADF },
  'fchmod 04755': { call: 'fchmod', args: [-1, 0o4755], without: e.EBADF, off: EPERM },
  'fchmodat 06755': { call: 'fchmodat', args: [-1, '', 0o6755], without: e.ENOENT, off: EPERM },
  'fchmodat2 02755': {
    call: 'fchmodat2',
    args: [-1, '', 0o2755, 0],
    without: e.ENOENT,
    off: EPERM,
  },
  'openat O_CREAT 0644': {
    call: 'openat',
    args: [-1, '', O_CREAT, 0o644],
    without: e.ENOENT,
    off: e.ENOENT,
  },
  'openat O_CREAT 04755': {
    call: 'openat',
    args: [-1, '', O_CREAT, 0o4755],
    without: e.ENOENT,
    off: EPERM,
  },
  'mknodat fifo': {
    call: 'mknodat',
    args: [-1, '', S_IFIFO | 0o644, 0],
    without: e.ENOENT,
    off: e.ENOENT,
  },
  'mknodat char device': {
    call: 'mknodat',
    args: [-1, '', S_IFCHR | 0o644, 0],
    without: e.ENOENT,
    off: EPERM,
  },
  'mknodat block device': {
    call: 'mknodat',
    args: [-1, '', S_IFBLK | 0o644, 0],
    without: e.ENOENT,
    off: EPERM,
  },
  'mknodat setgid fifo': {
    call: 'mknodat',
    args: [-1, '', S_IFIFO | 0o2644, 0],
    without: e.ENOENT,
    off: EPERM,
  },
  ...(x86
    ? {
        'chmod x86 04755': { call: 'chmod', args: ['', 0o4755], without: e.ENOENT, off: EPERM },
        'creat 04755': { call: 'creat', args: ['', 0o4755], without: e.ENOENT, off: EPERM },
        'open O_CREAT 02755': {
          call: 'open',
          args: ['', O_CREAT, 0o2755],
          without: e.ENOENT,
          off: EPERM,
        },
        'mknod char device': {
          call: 'mknod',
          args: ['', S_IFCHR | 0o644, 0],
          without: e.ENOENT,
          off: EPERM,
        },
      }
    : {}),
  // Sockets: AF_UNIX always; AF_INET and AF_INET6 with the network on; nothing else ever. A
  // bad type tells the filter's EPERM apart from the kernel's answer (EINVAL).
  'socket AF_UNIX': {
    call: 'socket',
    args: [AF_UNIX, SOCK_STREAM, 0],
    fd: true,
    without: 'ok',
    off: 'ok',
  },
  'socket AF_UNIX bad type': {
    call: 'socket',
    args: [AF_UNIX, BAD_TYPE, 0],
    without: e.EINVAL,
    off: e.EINVAL,
  },
  'socketpair AF_UNIX': {
    call: 'socketpair',
    args: [AF_UNIX, SOCK_STREAM, 0, { buffer: 8 }],
    without: 'ok',
    off: 'ok',
  },
  'socket AF_INET': {
    call: 'socket',
    args: [2, SOCK_STREAM, 0],
    fd: true,
    without: 'ok',
    off: EPERM,
    on: 'ok',
  },
  'socket AF_INET bad type': {
    call: 'socket',
    args: [2, BAD_TYPE, 0],
    without: e.EINVAL,
    off: EPERM,
    on: e.EINVAL,
  },
  // The kernel takes the family as an int: 2^32 + AF_INET is AF_INET.
  'socket AF_INET high bits': {
    call: 'socket',
    args: [2 ** 32 + 2, SOCK_STREAM, 0],
    fd: true,
    without: 'ok',
    off: EPERM,
    on: 'ok',
  },
  'socket AF_INET6 bad type': {
    call: 'socket',
    args: [10, BAD_TYPE, 0],
    without: e.EINVAL,
    off: EPERM,
    on: e.EINVAL,
  },
  'socket AF_NETLINK': {
    call: 'socket',
    args: [16, SOCK_RAW, 0],
    fd: true,
    without: 'ok',
    off: EPERM,
  },
  'socket AF_NETLINK bad type': {
    call: 'socket',
    args: [16, BAD_TYPE, 0],
    without: e.EINVAL,
    off: EPERM,
  },
  'socket AF_PACKET bad type': {
    call: 'socket',
    args: [17, BAD_TYPE, 0],
    without: e.EINVAL,
    off: EPERM,
  },
  'socket AF_ALG bad type': {
    call: 'socket',
    args: [38, BAD_TYPE, 0],
    without: e.EINVAL,
    off: EPERM,
  },
  'socket AF_VSOCK bad type': {
    call: 'socket',
    args: [40, BAD_TYPE, 0],
    without: e.EINVAL,
    off: EPERM,
  },
  // connect on fd -1: EBADF when it reaches the kernel (network on, or a Unix socket allowed).
  connect: { call: 'connect', args: [-1, 0, 0], without: e.EBADF, off: EPERM, on: e.EBADF },
  'sendto with an address': {
    call: 'sendto',
    args: [-1, 0, 0, 0, { buffer: 16 }, 16],
    without: e.EBADF,
    off: EPERM,
    on: e.EBADF,
  },
  'sendto without an address': {
    call: 'sendto',
    args: [-1, 0, 0, 0, 0, 0],
    without: e.EBADF,
    off: e.EBADF,
  },
  // A few plain allows: they reach the kernel, which answers as it would without the filter.
  getpid: { call: 'getpid', args: [], without: 'ok', off: 'ok' },
  'read fd -1': { call: 'read', args: [-1, 0, 0], without: e.EBADF, off: e.EBADF },
  'landlock ABI version': {
    call: 'landlock_create_ruleset',
    args: [0, 0, 1],
    without: 'ok',
    off: 'ok',
  },
  'memfd_create bad flags': {
    call: 'memfd_create',
    args: ['x', 0x7fffffff],
    without: e.EINVAL,
    off: e.EINVAL,
  },
};

/** Every probe: the refused calls this architecture has, then the argument rules. */
const probes: Readonly<Record<string, Probe>> = {
  ...Object.fromEntries(
    Object.entries(refused)
      .filter(([name]) => table[name] !== undefined)
      .map(([name, [args, without]]) => [name, { call: name, args, without, off: EPERM }]),
  ),
  ...ruled,
};

type Results = Record<string, Outcome>;

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
function probeSub(): string {
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

const probeScript = `$| = 1;\n${probeSub()}print probe(), "\\n";\n`;

/** The table's expected answers for one column, plus the fork check. */
function expected(column: 'without' | 'off' | 'on'): Results {
  return {
    ...Object.fromEntries(
      Object.entries(probes).map(([key, probe]) => [
        key,
        column === 'on' ? (probe.on ?? probe.off) : probe[column],
      ]),
    ),
    fork: 'ok',
  };
}

async function runProbes(allowNetwork: boolean): Promise<Results> {
  const result = await createSandbox({ allowNetwork }).run(perl, ['-e', probeScript]);
  expect(result.stderr).toBe('');
  expect(result.exitCode).toBe(0);
  expect(result.controls).toContain(SandboxControl.seccomp);
  return JSON.parse(result.stdout) as Results;
}

/** Runs `script` in a fresh user namespace (and mount, pid, net, ipc, uts ones), unfiltered. */
function inUserNamespace(script: string, ...args: string[]): string {
  const namespaces = [
    '--user',
    '--map-root-user',
    '--mount',
    '--pid',
    '--fork',
    '--net',
    '--ipc',
    '--uts',
  ];
  return execFileSync('unshare', [...namespaces, perl, '-e', script, ...args], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'pipe'],
    timeout: 10_000,
  });
}

describe('seccomp filter on the real kernel: an unfiltered control, then filtered', () => {
  // perl first issues every probe unfiltered, holding every capability over its own
  // namespaces and none over the host's; then it loads the package's filter itself
  // (seccomp(2), as bwrap does) and issues them again.
  const control = (allowNetwork: boolean) => `$| = 1;
syscall(${nr('setsid')}); # no controlling terminal: vhangup has nothing to hang up
${probeSub()}
print probe(), "\\n";
my $filter = pack('H*', $ARGV[0]);
my $fprog = pack('S x![p] p', length($filter) / 8, $filter);
syscall(${nr('prctl')}, 38, 1, 0, 0, 0) == 0 or die "PR_SET_NO_NEW_PRIVS: $!";
syscall(${nr('seccomp')}, 1, 0, $fprog) == 0 or die "SECCOMP_SET_MODE_FILTER: $!";
print probe(), "\\n";
# allowNetwork ${allowNetwork}
`;
  const runControl = (allowNetwork: boolean): [Results, Results] =>
    inUserNamespace(control(allowNetwork), buildSeccompFilter({ allowNetwork }).toString('hex'))
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as Results) as [Results, Results];
  let off: [Results, Results];
  let on: [Results, Results];
  beforeAll(() => {
    off = runControl(false);
    on = runControl(true);
  });

  it('without the filter every call gets the kernel answer of the table', () => {
    expect(off[0]).toEqual(expected('without'));
    expect(on[0]).toEqual(expected('without'));
  });

  it('with the filter (network off) every call gets the answer of the table', () => {
    expect(off[1]).toEqual(expected('off'));
  });

  it('with the filter (network on) every call gets the answer of the table', () => {
    expect(on[1]).toEqual(expected('on'));
  });

  it('the filter changes the answer wherever the table says it refuses', () => {
    // The EPERMs the kernel gives by itself are few, and named (host capabilities first).
    const kernelEperm = Object.keys(probes).filter((key) => probes[key]!.without === EPERM);
    expect(kernelEperm.sort()).toEqual(['acct', 'swapoff', 'swapon', 'syslog', 'vhangup']);
  });
});

/**
 * Calls the issue's allowlist must let through with any arguments, written here (not read from
 * the filter): each is issued with every argument -1 (a bad fd, pid, flag set or pointer), once
 * unfiltered and once filtered (each in a fresh namespace), and the kernel's answer must be the
 * same. Left out: the calls
 * that end, fork or block the probe with such arguments (exit, exit_group, fork, vfork, pause,
 * rt_sigreturn); fork is checked by the probe itself.
 */
const expectedAllowed = `
  read readv pread64 preadv lseek close close_range stat fstat lstat newfstatat
  statx statfs fstatfs access faccessat faccessat2 readlink readlinkat getdents getdents64
  getcwd chdir fchdir fcntl flock dup dup2 dup3 fadvise64 readahead getxattr lgetxattr
  fgetxattr getxattrat listxattr llistxattr flistxattr listxattrat write writev pwrite64
  pwritev pwritev2 truncate ftruncate fallocate fsync fdatasync sync_file_range syncfs mkdir
  mkdirat rmdir unlink unlinkat rename renameat renameat2 link linkat symlink symlinkat
  chown fchown fchownat lchown umask utime utimes utimensat futimesat setxattr lsetxattr
  fsetxattr setxattrat removexattr lremovexattr fremovexattr removexattrat copy_file_range
  sendfile splice tee vmsplice memfd_create brk mmap munmap mremap mprotect mincore
  msync mlock mlock2 munlock munlockall membarrier pkey_alloc pkey_free pkey_mprotect mseal
  map_shadow_stack execve execveat wait4 waitid kill tkill tgkill getpid getppid gettid
  getpgid setpgid getpgrp getsid setsid set_tid_address set_robust_list get_robust_list
  futex futex_waitv futex_wait futex_wake futex_requeue rseq arch_prctl pidfd_open
  pidfd_send_signal restart_syscall sched_yield sched_getaffinity sched_setaffinity
  sched_getparam sched_getscheduler sched_getattr sched_get_priority_max
  sched_get_priority_min sched_rr_get_interval getpriority setpriority ioprio_get getrlimit
  setrlimit prlimit64 getrusage times getuid geteuid getgid getegid getresuid getresgid
  getgroups setuid setgid setreuid setregid setresuid setresgid setfsuid setfsgid setgroups
  capget capset seccomp landlock_create_ruleset landlock_add_rule landlock_restrict_self
  rt_sigaction rt_sigprocmask rt_sigpending rt_sigsuspend rt_sigtimedwait rt_sigqueueinfo
  rt_tgsigqueueinfo sigaltstack signalfd signalfd4 alarm getitimer setitimer clock_gettime
  clock_getres clock_nanosleep nanosleep gettimeofday time timer_create timer_delete
  timer_settime timer_gettime timer_getoverrun timerfd_create timerfd_settime
  timerfd_gettime poll ppoll select pselect6 epoll_create epoll_create1 epoll_ctl epoll_wait
  epoll_pwait epoll_pwait2 eventfd eventfd2 inotify_init inotify_init1 inotify_add_watch
  inotify_rm_watch pipe pipe2 socketpair bind listen accept accept4 getsockname getpeername
  getsockopt setsockopt sendmsg sendmmsg recvfrom recvmsg recvmmsg shutdown msgget msgsnd
  msgrcv msgctl semget semop semtimedop semctl shmget shmat shmdt shmctl mq_open mq_unlink
  mq_timedsend mq_timedreceive mq_notify mq_getsetattr uname sysinfo getrandom getcpu
`
  .trim()
  .split(/\s+/)
  .filter((name) => table[name] !== undefined);

describe('seccomp filter on the real kernel: every allowed call reaches the kernel', () => {
  const script = `$| = 1;
my @calls = (${expectedAllowed.map((name) => `['${name}', ${nr(name)}]`).join(', ')});
sub run_all {
  my @out;
  for my $c (@calls) {
    $! = 0;
    my $r = syscall($c->[1], -1, -1, -1, -1, -1, -1);
    push @out, sprintf('"%s":%s', $c->[0], $r == -1 ? $! + 0 : '"ok"');
  }
  return '{' . join(',', @out) . '}';
}
if ($ARGV[0] ne '') {
  my $filter = pack('H*', $ARGV[0]);
  my $fprog = pack('S x![p] p', length($filter) / 8, $filter);
  syscall(${nr('prctl')}, 38, 1, 0, 0, 0) == 0 or die "PR_SET_NO_NEW_PRIVS: $!";
  syscall(${nr('seccomp')}, 1, 0, $fprog) == 0 or die "SECCOMP_SET_MODE_FILTER: $!";
}
print run_all(), "\n";
`;

  it.each([false, true])(
    'network %s: the same answer with the filter as without it',
    (allowNetwork) => {
      // Each pass in a fresh namespace of its own: some calls change state (setsid, msgget).
      const pass = (filter: string): Results =>
        JSON.parse(inUserNamespace(script, filter)) as Results;
      const without = pass('');
      const filtered = pass(buildSeccompFilter({ allowNetwork }).toString('hex'));
      expect(Object.keys(without)).toHaveLength(expectedAllowed.length);
      expect(expectedAllowed.length).toBeGreaterThan(200);
      expect(filtered).toEqual(without);
    },
  );
});

describe('seccomp filter in a real sandbox', () => {
  it('network off: every call gets the answer of the table', async () => {
    expect(await runProbes(false)).toEqual(expected('off'));
  });

  it('network on: every call gets the answer of the table', async () => {
    expect(await runProbes(true)).toEqual(expected('on'));
  });
});

/** The process was killed by SIGSYS (bubblewrap reports a signalled child as 128 + signal). */
function killedBySigsys(result: SandboxResult): boolean {
  return result.signal === 'SIGSYS' || result.exitCode === 128 + SIGSYS;
}

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

  // A kernel built or booted without IA32 emulation (CONFIG_IA32_EMULATION off, or
  // ia32_emulation=0) has no i386 entry: int 0x80 ends the process with SIGSEGV before any filter
  // sees a call, as on the machine of stop 36. Which kernel this is decides which of the two
  // tests below can say something; each asserts its one outcome.
  const i386Entry =
    x86 && spawnSync(python, ['-c', i386], { encoding: 'utf8' }).stdout === 'before\nafter True\n';

  it.runIf(i386Entry)('kills a process that makes an i386 call (int 0x80)', async () => {
    // Without the filter the i386 getpid returns the pid: the kill below is the filter's.
    const result = await createSandbox().run(python, ['-c', i386]);
    expect(result.stdout).toBe('before\n');
    expect(killedBySigsys(result), JSON.stringify(result)).toBe(true);
  });

  it.runIf(x86 && !i386Entry)(
    'on a kernel without an i386 entry, int 0x80 ends a sandboxed process as it ends any other (SIGSEGV)',
    async () => {
      const outside = spawnSync(python, ['-c', i386], { encoding: 'utf8' });
      expect([outside.stdout, outside.signal]).toEqual(['before\n', 'SIGSEGV']);
      const result = await createSandbox().run(python, ['-c', i386]);
      expect(result.stdout).toBe('before\n');
      expect(result.signal ?? result.exitCode, JSON.stringify(result)).toBeOneOf([
        'SIGSEGV',
        128 + constants.signals.SIGSEGV,
      ]);
    },
  );
});
