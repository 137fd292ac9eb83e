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
  /** The errno of a refusal; EPERM when not given. */
  readonly errno?: number;
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
/** "Inappropriate ioctl for device": what a file without the request answers. */
const ENOTTY = 25;
/** madvise advice opting a range into KSM (include/uapi/asm-generic/mman-common.h). */
const MADV_MERGEABLE = 12;
/** "Invalid argument": what madvise answers for MADV_MERGEABLE on a kernel without KSM. */
const EINVAL = 22;
/** preadv2's "do not wait for I/O" flag (include/uapi/linux/fs.h). */
const RWF_NOWAIT = 0x8;
/** "Operation not supported": what a file that cannot honour RWF_NOWAIT answers. */
const EOPNOTSUPP = 95;

/**
 * ioctl requests a program may make, by name: terminals (termios, window size, job control,
 * pseudo-terminals), descriptor flags and queue sizes, reading and cloning files, and the socket
 * reads of interfaces and timestamps. Every other request is refused with ENOTTY, as a file
 * without that ioctl answers, so a program that probes one goes on. Refused among them: TIOCSTI
 * and TIOCLINUX (input pushed into a terminal), TIOCSETD (line disciplines such as n_gsm and
 * n_hdlc, whose kernel code had use-after-frees reachable from a pty), TIOCCONS, TIOCSSERIAL,
 * FS_IOC_SETFLAGS, every write to an interface and every driver's own requests. The numbers are
 * asm-generic's, the same on x86-64 and arm64. Until an attack review (stop 32) this was a deny
 * list of TIOCSTI and TIOCLINUX.
 */
export const allowedIoctlRequests: Readonly<Record<string, number>> = Object.freeze({
  TCGETS: 0x5401,
  TCSETS: 0x5402,
  TCSETSW: 0x5403,
  TCSETSF: 0x5404,
  TCGETA: 0x5405,
  TCSETA: 0x5406,
  TCSETAW: 0x5407,
  TCSETAF: 0x5408,
  TCSBRK: 0x5409,
  TCXONC: 0x540a,
  TCFLSH: 0x540b,
  TIOCEXCL: 0x540c,
  TIOCNXCL: 0x540d,
  TIOCSCTTY: 0x540e,
  TIOCGPGRP: 0x540f,
  TIOCSPGRP: 0x5410,
  TIOCOUTQ: 0x5411,
  TIOCGWINSZ: 0x5413,
  TIOCSWINSZ: 0x5414,
  FIONREAD: 0x541b,
  TIOCPKT: 0x5420,
  FIONBIO: 0x5421,
  TIOCNOTTY: 0x5422,
  TIOCGETD: 0x5424,
  TCSBRKP: 0x5425,
  TIOCSBRK: 0x5427,
  TIOCCBRK: 0x5428,
  TIOCGSID: 0x5429,
  TCGETS2: 0x802c542a,
  TCSETS2: 0x402c542b,
  TCSETSW2: 0x402c542c,
  TCSETSF2: 0x402c542d,
  TIOCGPTN: 0x80045430,
  TIOCSPTLCK: 0x40045431,
  TIOCGDEV: 0x80045432,
  TIOCGPKT: 0x80045438,
  TIOCGPTLCK: 0x80045439,
  TIOCGEXCL: 0x80045440,
  TIOCGPTPEER: 0x5441,
  FIONCLEX: 0x5450,
  FIOCLEX: 0x5451,
  FIOASYNC: 0x5452,
  FIOQSIZE: 0x5460,
  FIGETBSZ: 0x2,
  FS_IOC_GETFLAGS: 0x80086601,
  FS_IOC_GETVERSION: 0x80087601,
  FS_IOC_FIEMAP: 0xc020660b,
  FS_IOC_FSGETXATTR: 0x801c581f,
  FICLONE: 0x40049409,
  FICLONERANGE: 0x4020940d,
  FIDEDUPERANGE: 0xc0189436,
  SIOCATMARK: 0x8905,
  SIOCGSTAMP: 0x8906,
  SIOCGSTAMPNS: 0x8907,
  SIOCGIFNAME: 0x8910,
  SIOCGIFCONF: 0x8912,
  SIOCGIFFLAGS: 0x8913,
  SIOCGIFADDR: 0x8915,
  SIOCGIFBRDADDR: 0x8919,
  SIOCGIFNETMASK: 0x891b,
  SIOCGIFMTU: 0x8921,
  SIOCGIFHWADDR: 0x8927,
  SIOCGIFINDEX: 0x8933,
  SIOCOUTQNSD: 0x894b,
});

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
    test: { kind: 'one-of', values: Object.values(allowedIoctlRequests) },
    errno: ENOTTY,
    reason: 'the requests in allowedIoctlRequests; any other is ENOTTY',
  },
  {
    syscall: 'prctl',
    arg: 0,
    test: { kind: 'one-of', values: Object.values(allowedPrctlOptions) },
    reason: 'the options in allowedPrctlOptions',
  },
  {
    syscall: 'madvise',
    arg: 2,
    test: { kind: 'none-of', values: [MADV_MERGEABLE] },
    errno: EINVAL,
    reason:
      'no MADV_MERGEABLE: KSM merges equal pages across processes, other runs included (the side channel PR_SET_MEMORY_MERGE is refused for); EINVAL is what a kernel without KSM answers',
  },
  {
    syscall: 'preadv2',
    arg: 5,
    test: { kind: 'no-bit', mask: RWF_NOWAIT },
    errno: EOPNOTSUPP,
    reason:
      'no RWF_NOWAIT: its EAGAIN says whether a page of a shared file is in the page cache, the side channel cachestat is refused for (with posix_fadvise DONTNEED, whether another run read it); EOPNOTSUPP is what a file that cannot honour it answers',
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
