// Builds the seccomp program this package hands to bubblewrap: an architecture check, the x32
// ABI refused, a deny list at least as strict as Docker's default profile's notable blocks,
// socket families other than AF_UNIX refused when the network is off, and an optional allowlist.
import { type BpfInstruction, bpf, encodeProgram, SeccompData, SeccompRet } from './bpf.ts';
import { aarch64Syscalls } from './syscalls-aarch64.ts';
import { x86_64Syscalls } from './syscalls-x86-64.ts';

/** What the generated filter must enforce. */
export interface SeccompFilterOptions {
  /** When false, `socket()` is refused for every family but AF_UNIX. */
  readonly allowNetwork: boolean;
  /** When given, every syscall not named here (and not on the deny list) fails with EPERM. */
  readonly allowedSyscalls?: readonly string[] | undefined;
  /**
   * With the network off: whether `connect()` (and `sendto()` to an address) may reach a Unix
   * socket. False refuses both with EPERM, so no host socket is reachable even if one were in
   * the view; `socketpair()` keeps working. Ignored when `allowNetwork` is true.
   */
  readonly allowUnixConnect?: boolean | undefined;
  /**
   * Refuse `truncate(2)` by name with EPERM: for the Landlock backend on ABI 1-2, which cannot
   * refuse it on a file the rules only let be read (`ftruncate` needs a descriptor opened for
   * writing, which every ABI checks).
   */
  readonly refuseTruncateByName?: boolean | undefined;
}

/** One architecture the filter knows: its audit id and syscall table. */
interface Architecture {
  readonly name: 'x86_64' | 'aarch64';
  readonly audit: number;
  readonly table: Readonly<Record<string, number>>;
  /** x86_64 also accepts x32 calls (nr | 0x40000000); they are killed. */
  readonly x32: boolean;
}

const architectures: readonly Architecture[] = [
  { name: 'x86_64', audit: 0xc000003e, table: x86_64Syscalls, x32: true },
  { name: 'aarch64', audit: 0xc00000b7, table: aarch64Syscalls, x32: false },
];

const EPERM = 1;
const ENOSYS = 38;
const AF_UNIX = 1;
const AF_VSOCK = 40;
/** The socket type's own bits (the rest are SOCK_NONBLOCK and SOCK_CLOEXEC). */
const SOCK_TYPE_MASK = 0xf;
const SOCK_DGRAM = 2;
/** An AF_UNIX SOCK_RAW socket is made a datagram socket by the kernel. */
const SOCK_RAW = 3;
const TIOCSTI = 0x5412;
const TIOCLINUX = 0x541c;
/** CLONE_NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET (Docker's mask). */
const cloneNamespaceFlags = 0x7e020000;

/**
 * Syscalls refused with EPERM in every mode: debugging other processes, mounts (old and new
 * API), namespaces, kernel modules and kexec, BPF and perf, the key store, io_uring (which
 * would bypass the socket rule), userfaultfd, clock and swap changes, reboot, raw I/O ports.
 */
export const deniedSyscalls: readonly string[] = Object.freeze([
  'ptrace',
  'process_vm_readv',
  'process_vm_writev',
  'process_madvise',
  'pidfd_getfd',
  'kcmp',
  'mount',
  'umount',
  'umount2',
  'pivot_root',
  'chroot',
  'open_tree',
  'open_tree_attr',
  'move_mount',
  'fsopen',
  'fsconfig',
  'fsmount',
  'fspick',
  'mount_setattr',
  'unshare',
  'setns',
  'bpf',
  'perf_event_open',
  'keyctl',
  'add_key',
  'request_key',
  'kexec_load',
  'kexec_file_load',
  'init_module',
  'finit_module',
  'delete_module',
  'create_module',
  'userfaultfd',
  'io_uring_setup',
  'io_uring_enter',
  'io_uring_register',
  'reboot',
  'swapon',
  'swapoff',
  'acct',
  'clock_settime',
  'clock_adjtime',
  'settimeofday',
  'adjtimex',
  'ioperm',
  'iopl',
  'open_by_handle_at',
  'name_to_handle_at',
  'quotactl',
  'quotactl_fd',
  'syslog',
  'lookup_dcookie',
  'nfsservctl',
  'vhangup',
  'uselib',
  'ustat',
  'sysfs',
  '_sysctl',
  'get_kernel_syms',
  'query_module',
  'fanotify_init',
  'lsm_set_self_attr',
]);

/** Every syscall name this package knows on any supported architecture. */
export function isKnownSyscall(name: string): boolean {
  return architectures.some((arch) => Object.hasOwn(arch.table, name));
}

/** Generates the BPF program (as instructions) for `options`. */
export function buildSeccompProgram(options: SeccompFilterOptions): BpfInstruction[] {
  const blocks = architectures.map((arch) => archBlock(arch, options));
  // Dispatch with 32-bit JA jumps: a block can be longer than an 8-bit conditional jump reaches.
  const dispatchLength = 1 + architectures.length * 2 + 1;
  const program: BpfInstruction[] = [bpf.load(SeccompData.arch)];
  let blockStart = dispatchLength;
  architectures.forEach((arch, index) => {
    const jaIndex = program.length + 1;
    program.push(bpf.jeq(arch.audit, 0, 1), bpf.ja(blockStart - (jaIndex + 1)));
    blockStart += blocks[index]!.length;
  });
  program.push(bpf.ret(SeccompRet.KILL_PROCESS));
  for (const block of blocks) program.push(...block);
  return program;
}

/** The raw filter bytes for `bwrap --seccomp FD`. */
export function buildSeccompFilter(options: SeccompFilterOptions): Buffer {
  return encodeProgram(buildSeccompProgram(options));
}

function archBlock(arch: Architecture, options: SeccompFilterOptions): BpfInstruction[] {
  const block: BpfInstruction[] = [bpf.load(SeccompData.nr)];
  const nr = (name: string): number | undefined => arch.table[name];
  if (arch.x32) block.push(bpf.jge(0x40000000, 0, 1), bpf.ret(SeccompRet.KILL_PROCESS));

  const deny = SeccompRet.errno(EPERM);
  for (const name of deniedSyscalls) {
    const number = nr(name);
    if (number !== undefined) block.push(bpf.jeq(number, 0, 1), bpf.ret(deny));
  }
  // clone3 passes its flags in memory BPF cannot read: ENOSYS makes libc fall back to clone.
  const clone3 = nr('clone3');
  if (clone3 !== undefined) block.push(bpf.jeq(clone3, 0, 1), bpf.ret(SeccompRet.errno(ENOSYS)));
  block.push(...argumentRule(nr('clone'), 0, 'any-bit', cloneNamespaceFlags, deny));
  for (const request of [TIOCSTI, TIOCLINUX]) {
    block.push(...argumentRule(nr('ioctl'), 1, 'equal', request, deny));
  }
  block.push(...argumentRule(nr('socket'), 0, 'equal', AF_VSOCK, deny));
  const truncate = nr('truncate');
  if (options.refuseTruncateByName === true && truncate !== undefined) {
    block.push(bpf.jeq(truncate, 0, 1), bpf.ret(deny));
  }
  if (!options.allowNetwork) {
    block.push(...argumentRule(nr('socket'), 0, 'not-equal', AF_UNIX, deny));
    if (options.allowUnixConnect !== true) {
      // Only AF_UNIX sockets exist here, and seccomp cannot read the path a call names: every
      // connect is refused, and sendto with a destination address (arg 4 not NULL).
      const connect = nr('connect');
      if (connect !== undefined) block.push(bpf.jeq(connect, 0, 1), bpf.ret(deny));
      block.push(...nonNullPointerRule(nr('sendto'), 4, deny));
      // sendmsg and sendmmsg name their address in memory seccomp cannot read, and a datagram
      // socket (socketpair's included) may send to any socket file it can name: where the host's
      // sockets are on the path (the Landlock backend) that reached a host service. No datagram
      // socket is made; stream and seqpacket ones cannot send without connecting.
      for (const call of ['socket', 'socketpair']) {
        for (const type of [SOCK_DGRAM, SOCK_RAW]) {
          block.push(...argumentRule(nr(call), 1, 'equal', type, deny, SOCK_TYPE_MASK));
        }
      }
    }
  }

  if (options.allowedSyscalls === undefined) {
    block.push(bpf.ret(SeccompRet.ALLOW));
    return block;
  }
  for (const name of new Set(options.allowedSyscalls)) {
    const number = nr(name);
    if (number !== undefined) block.push(bpf.jeq(number, 0, 1), bpf.ret(SeccompRet.ALLOW));
  }
  block.push(bpf.ret(deny));
  return block;
}

/**
 * `if (nr == syscall && test(low word of arg [& mask])) return action;`, then reloads the
 * syscall number. Only the low 32 bits are compared: the arguments tested here are `int`s.
 */
function argumentRule(
  syscall: number | undefined,
  arg: number,
  test: 'equal' | 'not-equal' | 'any-bit',
  value: number,
  action: number,
  mask?: number,
): BpfInstruction[] {
  if (syscall === undefined) return [];
  const compare =
    test === 'any-bit'
      ? bpf.jset(value, 0, 1)
      : test === 'equal'
        ? bpf.jeq(value, 0, 1)
        : bpf.jeq(value, 1, 0);
  const masking = mask === undefined ? [] : [bpf.and(mask)];
  return [
    bpf.jeq(syscall, 0, 4 + masking.length),
    bpf.load(SeccompData.argLow(arg)),
    ...masking,
    compare,
    bpf.ret(action),
    bpf.load(SeccompData.nr),
  ];
}

/**
 * `if (nr == syscall && arg != NULL) return action;` over all 64 bits of a pointer argument (a
 * pointer whose low word is zero is still a pointer), then reloads the syscall number.
 */
function nonNullPointerRule(
  syscall: number | undefined,
  arg: number,
  action: number,
): BpfInstruction[] {
  if (syscall === undefined) return [];
  return [
    bpf.jeq(syscall, 0, 5),
    bpf.load(SeccompData.argLow(arg)),
    bpf.jeq(0, 0, 2),
    bpf.load(SeccompData.argHigh(arg)),
    bpf.jeq(0, 1, 0),
    bpf.ret(action),
    bpf.load(SeccompData.nr),
  ];
}
