// Builds the seccomp program this package hands to bubblewrap: an architecture check (x32 and
// every architecture but x86_64 and aarch64 killed), then an allowlist: the calls of
// allowlist.ts, the argument rules of argument-rules.ts and the network rules below. Every
// other call fails with EPERM, or ENOSYS for the calls programs probe.
import {
  allowedSyscallGroups,
  plainAllowedSyscalls,
  probedSyscalls,
  removedFromMoby,
} from './allowlist.ts';
import { type ArgumentTest, argumentRules } from './argument-rules.ts';
import { type BpfInstruction, bpf, encodeProgram, SeccompData, SeccompRet } from './bpf.ts';
import { aarch64Syscalls } from './syscalls-aarch64.ts';
import { x86_64Syscalls } from './syscalls-x86-64.ts';

/** What the generated filter must enforce. */
export interface SeccompFilterOptions {
  /**
   * When false, `socket()` is refused for every family but AF_UNIX; when true, AF_UNIX,
   * AF_INET and AF_INET6 are allowed (never netlink, packet, vsock or the others).
   */
  readonly allowNetwork: boolean;
  /**
   * When given, only these of the default allowlist are allowed: it narrows, never widens (a
   * name the default refuses stays refused; see `extraSyscalls`).
   */
  readonly allowedSyscalls?: readonly string[] | undefined;
  /**
   * With the network off: whether `connect()` (and `sendto()` to an address) may reach a Unix
   * socket. False refuses both with EPERM, so no host socket is reachable even if one were in
   * the view; `socketpair()` keeps working. Ignored when `allowNetwork` is true.
   */
  readonly allowUnixConnect?: boolean | undefined;
  /**
   * Calls the default refuses, allowed anyway with any arguments (a loosening: the policy logs
   * it and a strict policy refuses it). Argument-ruled and probed calls cannot be named.
   */
  readonly extraSyscalls?: readonly string[] | undefined;
  /**
   * Refuse `truncate(2)` by name with EPERM: for the Landlock backend on ABI 1-2, which cannot
   * refuse it on a file the rules only let be read (`ftruncate` needs a descriptor opened for
   * writing, which every ABI checks).
   */
  readonly refuseTruncateByName?: boolean | undefined;
  /**
   * With the network on, for the Landlock backend's egress mode (TCP connect granted to the
   * proxy's port only): inet sockets are TCP streams only (SOCK_STREAM, protocol 0 or
   * IPPROTO_TCP: Landlock's TCP rules see no UDP, SCTP or MPTCP), no AF_UNIX socket() (connect's
   * address is in memory seccomp cannot read, so a host socket file would be reachable),
   * no datagram socketpair, `listen(2)` refused (on an unbound socket it binds a port without
   * Landlock's bind check), `MSG_FASTOPEN` refused on sendto, sendmsg and sendmmsg (a TCP
   * Fast Open send connects without Landlock's connect check) and `SO_BINDTODEVICE` and
   * `SO_BINDTOIFINDEX` refused (a connect to 127.0.0.1 from a socket bound to the uplink left
   * the machine by its default route). All three were seen on this
   * project's kernel (6.18). `connect(2)` returns SECCOMP_RET_USER_NOTIF: the Landlock applier's
   * supervisor (connect-supervisor.ts) refuses any address but the proxy's and connects the
   * socket itself; installed without a listener, every connect fails with ENOSYS. `seccomp(2)`
   * with SECCOMP_FILTER_FLAG_NEW_LISTENER is refused: a listener of the command's own would
   * decide its connects once the supervisor is gone.
   */
  readonly tcpClientOnly?: boolean | undefined;
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
/** socket() families by network mode. */
const socketFamilies = { off: [1], on: [1, 2, 10] } as const; // AF_UNIX, AF_INET, AF_INET6
/** The socket type's own bits (the rest are SOCK_NONBLOCK and SOCK_CLOEXEC). */
const SOCK_TYPE_MASK = 0xf;
const SOCK_DGRAM = 2;
/** An AF_UNIX SOCK_RAW socket is made a datagram socket by the kernel. */
const SOCK_RAW = 3;
const SOCK_STREAM = 1;
const AF_INET = 2;
const AF_INET6 = 10;
const IPPROTO_TCP = 6;
const SOL_SOCKET = 1;
/** Bind a socket to an interface, by name or by index (asm-generic, x86_64 and arm64 alike). */
const SO_BINDTODEVICE = 25;
const SO_BINDTOIFINDEX = 62;
/** A send flag: connect and send in one call (TCP Fast Open), past Landlock's connect check. */
const MSG_FASTOPEN = 0x20000000;
/** seccomp(2)'s flag that returns a user-notification listener for the new filter. */
const SECCOMP_FILTER_FLAG_NEW_LISTENER = 1 << 3;
/** The flags argument of each send call that can carry MSG_FASTOPEN. */
const sendFlagsArgument = { sendto: 3, sendmsg: 2, sendmmsg: 3 } as const;

/** The calls the filter decides by argument (never plainly allowed, never widened). */
export const argumentRuledSyscalls: readonly string[] = Object.freeze([
  ...new Set([...argumentRules.map((rule) => rule.syscall), 'socket', 'connect', 'sendto']),
]);

/** Every syscall name this package knows on any supported architecture. */
export function isKnownSyscall(name: string): boolean {
  return architectures.some((arch) => Object.hasOwn(arch.table, name));
}

/** Whether the default filter allows `name` (plainly or for some arguments). */
export function isDefaultAllowed(name: string): boolean {
  return plainAllowedSyscalls.includes(name) || argumentRuledSyscalls.includes(name);
}

/**
 * Why `extraSyscalls` cannot name `name`, or undefined when it can: it must be a known call
 * the default refuses that is neither argument-ruled nor probed.
 */
export function extraSyscallProblem(name: string): string | undefined {
  if (!isKnownSyscall(name)) return 'unknown syscall on x86_64 and aarch64';
  if (argumentRuledSyscalls.includes(name)) return 'decided by its arguments; cannot be widened';
  if (probedSyscalls.includes(name))
    return 'refused with ENOSYS so programs fall back; cannot be widened';
  if (plainAllowedSyscalls.includes(name)) return 'already allowed by the default filter';
  return undefined;
}

/** The allowlist as documentation: each group with its reason, and what moby allows that this refuses. */
export const seccompAllowlist = Object.freeze({
  groups: allowedSyscallGroups,
  argumentRules,
  probed: probedSyscalls,
  removedFromMoby,
});

/** Generates the BPF program (as instructions) for `options`. */
export function buildSeccompProgram(options: SeccompFilterOptions): BpfInstruction[] {
  for (const name of options.extraSyscalls ?? []) {
    const problem = extraSyscallProblem(name);
    if (problem !== undefined) throw new RangeError(`extraSyscalls: ${name}: ${problem}`);
  }
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

const allow = SeccompRet.ALLOW;
const deny = SeccompRet.errno(EPERM);

function archBlock(arch: Architecture, options: SeccompFilterOptions): BpfInstruction[] {
  const block: BpfInstruction[] = [bpf.load(SeccompData.nr)];
  const nr = (name: string): number | undefined => arch.table[name];
  if (arch.x32) block.push(bpf.jge(0x40000000, 0, 1), bpf.ret(SeccompRet.KILL_PROCESS));
  const narrowed =
    options.allowedSyscalls === undefined ? undefined : new Set(options.allowedSyscalls);
  const wanted = (name: string): boolean => narrowed === undefined || narrowed.has(name);

  for (const name of probedSyscalls) {
    const number = nr(name);
    if (number !== undefined) block.push(bpf.jeq(number, 0, 1), bpf.ret(SeccompRet.errno(ENOSYS)));
  }
  const rule = (name: string, body: BpfInstruction[]): void => {
    const number = nr(name);
    if (number === undefined || !wanted(name)) return;
    block.push(bpf.jeq(number, 0, body.length), ...body);
  };
  for (const { syscall, arg, test, errno } of argumentRules) {
    rule(syscall, argumentBody(arg, test, SeccompRet.errno(errno ?? EPERM)));
  }
  if (options.refuseTruncateByName === true) rule('truncate', [bpf.ret(deny)]);
  if (options.allowNetwork && options.tcpClientOnly === true) {
    rule('socket', tcpSocketBody());
    rule('socketpair', noDatagramBody());
    rule('listen', [bpf.ret(deny)]);
    // No socket bound to an interface: the supervisor and Landlock check where a connect goes
    // (127.0.0.1, the proxy's port), not which way. Bound to the uplink (unprivileged since
    // Linux 5.7), a connect to 127.0.0.1 followed its default route out of the machine, and a
    // Fast Open write rode in the SYN (attack-egress-landlock-device.test.ts).
    rule('setsockopt', noDeviceBindingBody());
    for (const [name, arg] of Object.entries(sendFlagsArgument)) {
      rule(name, argumentBody(arg, { kind: 'no-bit', mask: MSG_FASTOPEN }));
    }
    // seccomp cannot read connect's address: the applier's supervisor does, and connects.
    rule('connect', [bpf.ret(SeccompRet.USER_NOTIF)]);
    // No seccomp listener of the command's own. The kernel allows one per filter chain, so none
    // while the supervisor's exists; but the command may kill the supervisor (its parent: same
    // uid and Landlock domain), whose listener then goes, and a filter of its own returning
    // USER_NOTIF for connect takes precedence over the supervisor's (the newest filter wins a
    // tie): its listener answers SECCOMP_USER_NOTIF_FLAG_CONTINUE, and connect reaches any
    // address on the proxy's port past Landlock's per-port rule (attack-egress-pass.test.ts).
    rule('seccomp', argumentBody(1, { kind: 'no-bit', mask: SECCOMP_FILTER_FLAG_NEW_LISTENER }));
    return finish(block, options, wanted, nr);
  }
  const families = options.allowNetwork ? socketFamilies.on : socketFamilies.off;
  const unixConnect = options.allowNetwork || options.allowUnixConnect === true;
  rule(
    'socket',
    unixConnect
      ? argumentBody(0, { kind: 'one-of', values: families })
      : [bpf.load(SeccompData.argLow(0)), bpf.jeq(families[0], 0, 5), ...noDatagramBody()],
  );
  // Without the network only AF_UNIX sockets exist, and seccomp cannot read the path a call
  // names: every connect is refused, and sendto with a destination address (arg 4 not NULL).
  if (unixConnect) {
    rule('connect', [bpf.ret(allow)]);
    rule('sendto', [bpf.ret(allow)]);
  } else {
    rule('sendto', nonNullPointerBody(4));
    // sendmsg and sendmmsg name their address in memory seccomp cannot read, and a datagram
    // socket (socketpair's included) may send to any socket file it can name: where the host's
    // sockets are on the path (the Landlock backend) that reached a host service. No datagram
    // socket is made; stream and seqpacket ones cannot send without connecting.
    rule('socketpair', noDatagramBody());
  }
  return finish(block, options, wanted, nr);
}

/** Appends the plainly allowed calls and the final refusal to `block`. */
function finish(
  block: BpfInstruction[],
  options: SeccompFilterOptions,
  wanted: (name: string) => boolean,
  nr: (name: string) => number | undefined,
): BpfInstruction[] {
  const plain = [...plainAllowedSyscalls.filter(wanted), ...(options.extraSyscalls ?? [])];
  for (const name of new Set(plain)) {
    const number = nr(name);
    if (number !== undefined) block.push(bpf.jeq(number, 0, 1), bpf.ret(allow));
  }
  block.push(bpf.ret(deny));
  return block;
}

/**
 * socket(): AF_INET or AF_INET6 only, of type SOCK_STREAM (whatever its flags) and protocol 0
 * or IPPROTO_TCP; everything else refused.
 */
function tcpSocketBody(): BpfInstruction[] {
  return [
    bpf.load(SeccompData.argLow(0)),
    bpf.jeq(AF_INET, 1, 0),
    bpf.jeq(AF_INET6, 0, 6), // to the deny
    bpf.load(SeccompData.argLow(1)),
    bpf.and(SOCK_TYPE_MASK),
    bpf.jeq(SOCK_STREAM, 0, 3), // to the deny
    bpf.load(SeccompData.argLow(2)),
    bpf.jeq(0, 2, 0),
    bpf.jeq(IPPROTO_TCP, 1, 0),
    bpf.ret(deny),
    bpf.ret(allow),
  ];
}

/** setsockopt(): refuses SOL_SOCKET's SO_BINDTODEVICE and SO_BINDTOIFINDEX, allows the rest. */
function noDeviceBindingBody(): BpfInstruction[] {
  return [
    bpf.load(SeccompData.argLow(1)),
    bpf.jeq(SOL_SOCKET, 0, 3), // another level: to the allow
    bpf.load(SeccompData.argLow(2)),
    bpf.jeq(SO_BINDTODEVICE, 2, 0), // to the deny
    bpf.jeq(SO_BINDTOIFINDEX, 1, 0),
    bpf.ret(allow),
    bpf.ret(deny),
  ];
}

/** Instructions that load argument `arg`'s low word and return allow or `refuse` by `test`. */
function argumentBody(arg: number, test: ArgumentTest, refuse = deny): BpfInstruction[] {
  const load = bpf.load(SeccompData.argLow(arg));
  switch (test.kind) {
    case 'one-of': {
      // Each match jumps over the remaining comparisons and the deny to the allow.
      const n = test.values.length;
      const jumps = test.values.map((value, i) => bpf.jeq(value, n - i, 0));
      return [load, ...jumps, bpf.ret(refuse), bpf.ret(allow)];
    }
    case 'none-of': {
      const n = test.values.length;
      const jumps = test.values.map((value, i) => bpf.jeq(value, n - i, 0));
      return [load, ...jumps, bpf.ret(allow), bpf.ret(refuse)];
    }
    case 'no-bit':
      return [load, bpf.jset(test.mask, 1, 0), bpf.ret(allow), bpf.ret(refuse)];
    case 'file-type': {
      const n = test.types.length;
      const jumps = test.types.map((type, i) => bpf.jeq(type, n - i, 0));
      return [
        load,
        bpf.jset(test.mask, n + 2, 0), // to the deny: past and, the type checks and the allow
        bpf.and(test.typeMask),
        ...jumps,
        bpf.ret(allow),
        bpf.ret(refuse),
      ];
    }
  }
}

/** Loads argument 1 (a socket type) and refuses SOCK_DGRAM and SOCK_RAW, whatever its flags. */
function noDatagramBody(): BpfInstruction[] {
  return [
    bpf.load(SeccompData.argLow(1)),
    bpf.and(SOCK_TYPE_MASK),
    bpf.jeq(SOCK_DGRAM, 2, 0),
    bpf.jeq(SOCK_RAW, 1, 0),
    bpf.ret(allow),
    bpf.ret(deny),
  ];
}

/**
 * Refuses the call when pointer argument `arg` is not NULL, over all 64 bits (a pointer whose
 * low word is zero is still a pointer); allows it otherwise.
 */
function nonNullPointerBody(arg: number): BpfInstruction[] {
  return [
    bpf.load(SeccompData.argLow(arg)),
    bpf.jeq(0, 0, 2),
    bpf.load(SeccompData.argHigh(arg)),
    bpf.jeq(0, 1, 0),
    bpf.ret(deny),
    bpf.ret(allow),
  ];
}
