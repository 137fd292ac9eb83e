// Syscalls allowed only for some arguments, as data. Each rule reads one argument's low 32 bits
// (every argument tested is an int, an unsigned int or a mode_t the kernel truncates the same
// way) and allows the call, or refuses it with EPERM. The filter compiles these after the
// architecture check; `filter.ts` adds the network rules (socket families, connect, sendto).

/** How one argument decides a call. */
export type ArgumentTest =
  /** Allowed only when the argument is one of `values`. */
  | {
      /** The test's name. */
      readonly kind: 'one-of';
      /** The values allowed. */
      readonly values: readonly number[];
    }
  /** Refused when the argument is one of `values`. */
  | {
      /** The test's name. */
      readonly kind: 'none-of';
      /** The values refused. */
      readonly values: readonly number[];
    }
  /** Refused when the argument has any bit of `mask` set. */
  | {
      /** The test's name. */
      readonly kind: 'no-bit';
      /** The bits refused. */
      readonly mask: number;
    }
  /** Refused when `arg & typeMask` is one of `types`, or any bit of `mask` is set. */
  | {
      /** The test's name. */
      readonly kind: 'file-type';
      /** The file-type bits of a mode (S_IFMT). */
      readonly typeMask: number;
      /** The file types refused. */
      readonly types: readonly number[];
      /** Mode bits refused whatever the type. */
      readonly mask: number;
    };

/** One argument rule: `syscall` is allowed when argument `arg` passes `test`. */
export interface ArgumentRule {
  /** The syscall's name. */
  readonly syscall: string;
  /** Which argument decides (0-based). */
  readonly arg: number;
  /** How it decides. */
  readonly test: ArgumentTest;
  /** What the rule allows and why. */
  readonly reason: string;
}

/** CLONE_NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET (moby's mask). */
const cloneNamespaceFlags = 0x7e020000;
/** S_ISUID | S_ISGID. */
const setIdBits = 0o6000;
const S_IFMT = 0o170000;
const S_IFCHR = 0o020000;
const S_IFBLK = 0o060000;
const TIOCSTI = 0x5412;
const TIOCLINUX = 0x541c;

/**
 * prctl options a program may use: names, death signals, dumpability, no_new_privs, its own
 * seccomp mode, reading and dropping capabilities (setpriv), timer slack, THP opt-out, naming
 * anonymous mappings (PR_SET_VMA), and the arm64/x86 options of its own address space. Refused,
 * among others: PR_SET_MM, PR_SET_PTRACER, PR_SET_SPECULATION_CTRL, PR_SET_MEMORY_MERGE (KSM
 * merges pages across tenants), PR_SET_SYSCALL_USER_DISPATCH, PR_SCHED_CORE, PR_SET_SECUREBITS,
 * PR_TASK_PERF_EVENTS_*, PR_SET_IO_FLUSHER.
 */
export const allowedPrctlOptions: Readonly<Record<string, number>> = Object.freeze({
  PR_SET_PDEATHSIG: 1,
  PR_GET_PDEATHSIG: 2,
  PR_GET_DUMPABLE: 3,
  PR_SET_DUMPABLE: 4,
  PR_GET_KEEPCAPS: 7,
  PR_SET_KEEPCAPS: 8,
  PR_SET_NAME: 15,
  PR_GET_NAME: 16,
  PR_GET_SECCOMP: 21,
  PR_SET_SECCOMP: 22,
  PR_CAPBSET_READ: 23,
  PR_CAPBSET_DROP: 24,
  PR_GET_SECUREBITS: 27,
  PR_SET_TIMERSLACK: 29,
  PR_GET_TIMERSLACK: 30,
  PR_SET_CHILD_SUBREAPER: 36,
  PR_GET_CHILD_SUBREAPER: 37,
  PR_SET_NO_NEW_PRIVS: 38,
  PR_GET_NO_NEW_PRIVS: 39,
  PR_GET_TID_ADDRESS: 40,
  PR_SET_THP_DISABLE: 41,
  PR_GET_THP_DISABLE: 42,
  PR_CAP_AMBIENT: 47,
  PR_SVE_SET_VL: 50,
  PR_SVE_GET_VL: 51,
  PR_GET_SPECULATION_CTRL: 52,
  PR_PAC_RESET_KEYS: 54,
  PR_SET_TAGGED_ADDR_CTRL: 55,
  PR_GET_TAGGED_ADDR_CTRL: 56,
  PR_SET_MDWE: 65,
  PR_GET_MDWE: 66,
  PR_GET_SHADOW_STACK_STATUS: 74,
  PR_SET_SHADOW_STACK_STATUS: 75,
  PR_LOCK_SHADOW_STACK_STATUS: 76,
  PR_GET_AUXV: 0x41555856,
  PR_SET_VMA: 0x53564d41,
});

/** Every argument rule, in the order the filter checks them. */
export const argumentRules: readonly ArgumentRule[] = Object.freeze([
  {
    syscall: 'clone',
    arg: 0,
    test: { kind: 'no-bit', mask: cloneNamespaceFlags },
    reason:
      'threads and processes, but no new namespace (clone3 is ENOSYS: its flags are in memory)',
  },
  {
    syscall: 'personality',
    arg: 0,
    // PER_LINUX, PER_LINUX32, UNAME26, both, and the query (0xffffffff): moby's values.
    test: { kind: 'one-of', values: [0, 0x8, 0x20000, 0x20008, 0xffffffff] },
    reason: 'the personalities programs set; not ADDR_NO_RANDOMIZE, READ_IMPLIES_EXEC and the like',
  },
  {
    syscall: 'ioctl',
    arg: 1,
    test: { kind: 'none-of', values: [TIOCSTI, TIOCLINUX] },
    reason: 'every request but TIOCSTI and TIOCLINUX, which push input into a terminal',
  },
  {
    syscall: 'prctl',
    arg: 0,
    test: { kind: 'one-of', values: Object.values(allowedPrctlOptions) },
    reason: 'the options in allowedPrctlOptions',
  },
  ...(
    [
      ['chmod', 1],
      ['fchmod', 1],
      ['fchmodat', 2],
      ['fchmodat2', 2],
      // The mode of a file created by open: set-id bits there make a set-id file too.
      ['creat', 1],
      ['open', 2],
      ['openat', 3],
    ] as const
  ).map(([syscall, arg]) => ({
    syscall,
    arg,
    test: { kind: 'no-bit', mask: setIdBits } as const,
    reason: 'no set-user-id or set-group-id bit: no set-id file outlives the run',
  })),
  ...(
    [
      ['mknod', 1],
      ['mknodat', 2],
    ] as const
  ).map(([syscall, arg]) => ({
    syscall,
    arg,
    test: {
      kind: 'file-type',
      typeMask: S_IFMT,
      types: [S_IFCHR, S_IFBLK],
      mask: setIdBits,
    } as const,
    reason: 'FIFOs, sockets and regular files; no device node, no set-id bit',
  })),
]);
