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
  for (const { syscall, arg, test } of argumentRules) rule(syscall, argumentBody(arg, test));
  const families = options.allowNetwork ? socketFamilies.on : socketFamilies.off;
  rule('socket', argumentBody(0, { kind: 'one-of', values: families }));
  const unixConnect = options.allowNetwork || options.allowUnixConnect === true;
  // Without the network only AF_UNIX sockets exist, and seccomp cannot read the path a call
  // names: every connect is refused, and sendto with a destination address (arg 4 not NULL).
  if (unixConnect) {
    rule('connect', [bpf.ret(allow)]);
    rule('sendto', [bpf.ret(allow)]);
  } else {
    rule('sendto', nonNullPointerBody(4));
  }

  const plain = [...plainAllowedSyscalls.filter(wanted), ...(options.extraSyscalls ?? [])];
  for (const name of new Set(plain)) {
    const number = nr(name);
    if (number !== undefined) block.push(bpf.jeq(number, 0, 1), bpf.ret(allow));
  }
  block.push(bpf.ret(deny));
  return block;
}

/** Instructions that load argument `arg`'s low word and return allow or deny by `test`. */
function argumentBody(arg: number, test: ArgumentTest): BpfInstruction[] {
  const load = bpf.load(SeccompData.argLow(arg));
  switch (test.kind) {
    case 'one-of': {
      // Each match jumps over the remaining comparisons and the deny to the allow.
      const n = test.values.length;
      const jumps = test.values.map((value, i) => bpf.jeq(value, n - i, 0));
      return [load, ...jumps, bpf.ret(deny), bpf.ret(allow)];
    }
    case 'none-of': {
      const n = test.values.length;
      const jumps = test.values.map((value, i) => bpf.jeq(value, n - i, 0));
      return [load, ...jumps, bpf.ret(allow), bpf.ret(deny)];
    }
    case 'no-bit':
      return [load, bpf.jset(test.mask, 1, 0), bpf.ret(allow), bpf.ret(deny)];
    case 'file-type': {
      const n = test.types.length;
      const jumps = test.types.map((type, i) => bpf.jeq(type, n - i, 0));
      return [
        load,
        bpf.jset(test.mask, n + 2, 0), // to the deny: past and, the type checks and the allow
        bpf.and(test.typeMask),
        ...jumps,
        bpf.ret(allow),
        bpf.ret(deny),
      ];
    }
  }
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
