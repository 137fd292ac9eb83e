import { describe, expect, it } from 'vitest';
import { runFilter } from '../../../test/support/bpf-emulator.ts';
import { encodeProgram, SeccompRet } from './bpf.ts';
import {
  buildSeccompFilter,
  buildSeccompProgram,
  extraSyscallProblem,
  seccompAllowlist,
} from './filter.ts';
import { aarch64Syscalls } from './syscalls-aarch64.ts';
import { x86_64Syscalls } from './syscalls-x86-64.ts';

const X86_64 = 0xc000003e;
const AARCH64 = 0xc00000b7;
const I386 = 0x40000003;
const EPERM = SeccompRet.errno(1);
const ENOSYS = SeccompRet.errno(38);
const ENOTTY = SeccompRet.errno(25);
const { ALLOW, KILL_PROCESS } = SeccompRet;
const arches = [
  { arch: X86_64, table: x86_64Syscalls },
  { arch: AARCH64, table: aarch64Syscalls },
];

/**
 * The expected decision for calls of every kind, written here from the issue and moby's
 * profile, not read from the filter's data: allowed, refused with EPERM, or ENOSYS.
 */
const expectedPlain: Readonly<Record<string, 'allow' | 'eperm' | 'enosys'>> = {
  read: 'allow',
  write: 'allow',
  execve: 'allow',
  mmap: 'allow',
  futex: 'allow',
  rseq: 'allow',
  exit_group: 'allow',
  getrandom: 'allow',
  wait4: 'allow',
  socketpair: 'allow',
  seccomp: 'allow',
  landlock_restrict_self: 'allow',
  ptrace: 'eperm',
  process_vm_readv: 'eperm',
  mount: 'eperm',
  umount2: 'eperm',
  unshare: 'eperm',
  setns: 'eperm',
  bpf: 'eperm',
  perf_event_open: 'eperm',
  keyctl: 'eperm',
  add_key: 'eperm',
  kexec_load: 'eperm',
  init_module: 'eperm',
  userfaultfd: 'eperm',
  name_to_handle_at: 'eperm',
  open_by_handle_at: 'eperm',
  fanotify_init: 'eperm',
  adjtimex: 'eperm',
  clock_settime: 'eperm',
  sync: 'eperm',
  cachestat: 'eperm',
  memfd_secret: 'eperm',
  sched_setattr: 'eperm',
  io_setup: 'eperm',
  mbind: 'eperm',
  move_pages: 'eperm',
  pidfd_getfd: 'eperm',
  kcmp: 'eperm',
  swapon: 'eperm',
  reboot: 'eperm',
  clone3: 'enosys',
  openat2: 'enosys',
  io_uring_setup: 'enosys',
};
const verdict = { allow: ALLOW, eperm: EPERM, enosys: ENOSYS } as const;

describe('generated seccomp filter (BPF emulator)', () => {
  const open = buildSeccompProgram({ allowNetwork: true });
  const closed = buildSeccompProgram({ allowNetwork: false });

  it('kills other architectures and the x32 ABI', () => {
    expect(runFilter(open, { arch: I386, nr: 0 })).toBe(KILL_PROCESS);
    expect(runFilter(open, { arch: 0xdeadbeef, nr: 1 })).toBe(KILL_PROCESS);
    expect(runFilter(open, { arch: X86_64, nr: 0x40000000 + 1 })).toBe(KILL_PROCESS);
  });

  it.each(arches)('decides each call of the expected table on arch %#', ({ arch, table }) => {
    for (const [name, expected] of Object.entries(expectedPlain)) {
      const nr = table[name];
      if (nr === undefined) continue;
      expect(runFilter(open, { arch, nr }), name).toBe(verdict[expected]);
      expect(runFilter(closed, { arch, nr }), name).toBe(verdict[expected]);
    }
    // A number no table has is refused too: the default is EPERM, not ALLOW.
    expect(runFilter(open, { arch, nr: 999 })).toBe(EPERM);
  });

  it('kills nothing on x86_64 that is only x86 (arch_prctl allowed, modify_ldt refused)', () => {
    expect(runFilter(open, { arch: X86_64, nr: x86_64Syscalls.arch_prctl! })).toBe(ALLOW);
    expect(runFilter(open, { arch: X86_64, nr: x86_64Syscalls.modify_ldt! })).toBe(EPERM);
  });

  it.each(arches)('argument rules: clone, personality, ioctl, prctl', ({ arch, table }) => {
    const call = (name: string, ...args: number[]) =>
      runFilter(open, { arch, nr: table[name]!, args });
    expect(call('clone', 0x01200011)).toBe(ALLOW); // fork-like
    expect(call('clone', 0x003d0f00)).toBe(ALLOW); // pthread_create's flags
    for (const flag of [
      0x20000, 0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000, 0x40000000,
    ]) {
      expect(call('clone', flag | 0x11), flag.toString(16)).toBe(EPERM);
    }
    for (const persona of [0, 0x8, 0x20000, 0x20008, 0xffffffff]) {
      expect(call('personality', persona), persona.toString(16)).toBe(ALLOW);
    }
    expect(call('personality', 0x0040000)).toBe(EPERM); // ADDR_NO_RANDOMIZE
    expect(call('personality', 0x0400000)).toBe(EPERM); // READ_IMPLIES_EXEC
    // ioctl is an allowlist (written out here, not read from the filter): what programs use
    // passes, anything else is ENOTTY, as from a file without that request.
    const ioctlAllowed: Record<string, number> = {
      TCGETS: 0x5401,
      TCSETS: 0x5402,
      TIOCGPGRP: 0x540f,
      TIOCGWINSZ: 0x5413,
      FIONREAD: 0x541b,
      FIONBIO: 0x5421,
      TIOCGPTN: 0x80045430,
      TIOCSPTLCK: 0x40045431,
      TIOCGPTPEER: 0x5441,
      FIOCLEX: 0x5451,
      FICLONE: 0x40049409,
      FS_IOC_FIEMAP: 0xc020660b,
      SIOCGIFINDEX: 0x8933,
    };
    const ioctlRefused: Record<string, number> = {
      TIOCSTI: 0x5412,
      TIOCLINUX: 0x541c,
      TIOCCONS: 0x541d,
      TIOCSSERIAL: 0x541f,
      TIOCSETD: 0x5423,
      TIOCVHANGUP: 0x5437,
      FS_IOC_SETFLAGS: 0x40086602,
      SIOCSIFFLAGS: 0x8914,
      SIOCSIFADDR: 0x8916,
      SECCOMP_IOCTL_NOTIF_RECV: 0xc0502100,
      KDSETMODE: 0x4b3a,
      VT_ACTIVATE: 0x5606,
      0: 0,
    };
    for (const [name, request] of Object.entries(ioctlAllowed)) {
      expect({ name, ret: call('ioctl', 0, request) }).toEqual({ name, ret: ALLOW });
    }
    for (const [name, request] of Object.entries(ioctlRefused)) {
      expect({ name, ret: call('ioctl', 0, request) }).toEqual({ name, ret: ENOTTY });
    }
    for (const option of [15, 16, 1, 38, 22, 23, 24, 47, 0x53564d41]) {
      expect(call('prctl', option), String(option)).toBe(ALLOW);
    }
    // PR_SET_MM, PR_SET_PTRACER, PR_SET_SPECULATION_CTRL, PR_SET_MEMORY_MERGE, syscall user
    // dispatch, core scheduling, PR_SET_SECUREBITS, perf events off.
    for (const option of [35, 0x59616d61, 53, 67, 59, 62, 28, 31]) {
      expect(call('prctl', option), String(option)).toBe(EPERM);
    }
  });

  it.each(arches)('argument rules: no set-id bit, no device node', ({ arch, table }) => {
    const call = (name: string, ...args: number[]) =>
      runFilter(open, { arch, nr: table[name]!, args });
    const modes = { plain: 0o755, setuid: 0o4755, setgid: 0o2755, sticky: 0o1777 };
    const at = (name: string, index: number, mode: number) =>
      call(name, ...Array.from({ length: index }, () => 0), mode);
    for (const [name, index] of [
      ['chmod', 1],
      ['fchmod', 1],
      ['fchmodat', 2],
      ['fchmodat2', 2],
      ['open', 2],
      ['openat', 3],
      ['creat', 1],
    ] as const) {
      if (table[name] === undefined) continue;
      expect(at(name, index, modes.plain), name).toBe(ALLOW);
      expect(at(name, index, modes.sticky), name).toBe(ALLOW);
      expect(at(name, index, modes.setuid), name).toBe(EPERM);
      expect(at(name, index, modes.setgid), name).toBe(EPERM);
    }
    for (const [name, index] of [
      ['mknod', 1],
      ['mknodat', 2],
    ] as const) {
      if (table[name] === undefined) continue;
      expect(at(name, index, 0o010644), `${name} fifo`).toBe(ALLOW);
      expect(at(name, index, 0o140644), `${name} socket`).toBe(ALLOW);
      expect(at(name, index, 0o100644), `${name} file`).toBe(ALLOW);
      expect(at(name, index, 0o020644), `${name} char`).toBe(EPERM);
      expect(at(name, index, 0o060644), `${name} block`).toBe(EPERM);
      expect(at(name, index, 0o104755), `${name} setuid`).toBe(EPERM);
    }
  });

  it.each(arches)('socket families, connect and sendto by network mode', ({ arch, table }) => {
    const socket = table.socket!;
    const families = {
      AF_UNIX: 1,
      AF_INET: 2,
      AF_INET6: 10,
      AF_NETLINK: 16,
      AF_PACKET: 17,
      AF_ALG: 38,
      AF_VSOCK: 40,
    };
    const off = {
      AF_UNIX: ALLOW,
      AF_INET: EPERM,
      AF_INET6: EPERM,
      AF_NETLINK: EPERM,
      AF_PACKET: EPERM,
      AF_ALG: EPERM,
      AF_VSOCK: EPERM,
    };
    const on = { ...off, AF_INET: ALLOW, AF_INET6: ALLOW };
    for (const [name, family] of Object.entries(families)) {
      expect(runFilter(closed, { arch, nr: socket, args: [family] }), name).toBe(
        off[name as keyof typeof off],
      );
      expect(runFilter(open, { arch, nr: socket, args: [family] }), name).toBe(
        on[name as keyof typeof on],
      );
    }
    expect(runFilter(closed, { arch, nr: table.connect! })).toBe(EPERM);
    expect(runFilter(open, { arch, nr: table.connect! })).toBe(ALLOW);
    expect(runFilter(closed, { arch, nr: table.sendto!, args: [3, 0, 0, 0, 0x1000] })).toBe(EPERM);
    expect(runFilter(closed, { arch, nr: table.sendto!, args: [3, 0, 0, 0, 0] })).toBe(ALLOW);
    const unix = buildSeccompProgram({ allowNetwork: false, allowUnixConnect: true });
    expect(runFilter(unix, { arch, nr: table.connect! })).toBe(ALLOW);
    expect(runFilter(unix, { arch, nr: socket, args: [2] })).toBe(EPERM);
  });

  // sendmsg's address is in memory the filter cannot read: no datagram socket may exist to use it.
  const socketTypes = [
    { type: 1, name: 'SOCK_STREAM', refused: false },
    { type: 1 | 0x80800, name: 'SOCK_STREAM|NONBLOCK|CLOEXEC', refused: false },
    { type: 5, name: 'SOCK_SEQPACKET', refused: false },
    { type: 2, name: 'SOCK_DGRAM', refused: true },
    { type: 2 | 0x80000, name: 'SOCK_DGRAM|CLOEXEC', refused: true },
    { type: 2 | 0x800, name: 'SOCK_DGRAM|NONBLOCK', refused: true },
    { type: 3, name: 'SOCK_RAW (a datagram socket for AF_UNIX)', refused: true },
    { type: 3 | 0x80800, name: 'SOCK_RAW|NONBLOCK|CLOEXEC', refused: true },
  ];
  it.each(arches)('makes no AF_UNIX datagram socket when connect is refused', ({ arch, table }) => {
    const connectOk = buildSeccompProgram({ allowNetwork: false, allowUnixConnect: true });
    for (const call of ['socket', 'socketpair']) {
      for (const { type, name, refused } of socketTypes) {
        const nr = table[call]!;
        const label = `${call} ${name}`;
        expect(runFilter(closed, { arch, nr, args: [1, type] }), label).toBe(
          refused ? EPERM : ALLOW,
        );
        expect(runFilter(connectOk, { arch, nr, args: [1, type] }), label).toBe(ALLOW);
        expect(runFilter(open, { arch, nr, args: [1, type] }), label).toBe(ALLOW);
      }
    }
  });

  it.each(arches)(
    "tcpClientOnly (Landlock's network allowlist): TCP client sockets, connect to the supervisor",
    ({ arch, table }) => {
      const tcp = buildSeccompProgram({ allowNetwork: true, tcpClientOnly: true });
      // SECCOMP_RET_USER_NOTIF (include/uapi/linux/seccomp.h).
      const USER_NOTIF = 0x7fc00000;
      // [family, type, protocol] and the decision, from socket(2) and the issue: TCP or nothing.
      const sockets: [string, number[], number][] = [
        ['AF_INET SOCK_STREAM', [2, 1, 0], ALLOW],
        ['AF_INET SOCK_STREAM|NONBLOCK|CLOEXEC IPPROTO_TCP', [2, 1 | 0x80800, 6], ALLOW],
        ['AF_INET6 SOCK_STREAM', [10, 1, 0], ALLOW],
        ['AF_INET SOCK_DGRAM (UDP, DNS)', [2, 2, 0], EPERM],
        ['AF_INET6 SOCK_DGRAM|CLOEXEC', [10, 2 | 0x80000, 0], EPERM],
        ['AF_INET SOCK_RAW', [2, 3, 1], EPERM],
        ['AF_INET SOCK_STREAM IPPROTO_SCTP', [2, 1, 132], EPERM],
        ['AF_INET SOCK_STREAM IPPROTO_MPTCP', [2, 1, 262], EPERM],
        ['AF_INET SOCK_SEQPACKET', [2, 5, 0], EPERM],
        ['AF_UNIX SOCK_STREAM', [1, 1, 0], EPERM],
        ['AF_NETLINK', [16, 3, 0], EPERM],
        ['AF_PACKET', [17, 3, 0], EPERM],
      ];
      for (const [name, args, decision] of sockets) {
        expect(runFilter(tcp, { arch, nr: table.socket!, args }), name).toBe(decision);
      }
      expect(runFilter(tcp, { arch, nr: table.socketpair!, args: [1, 1] })).toBe(ALLOW);
      expect(runFilter(tcp, { arch, nr: table.socketpair!, args: [1, 2] })).toBe(EPERM);
      expect(runFilter(tcp, { arch, nr: table.listen! })).toBe(EPERM);
      expect(runFilter(tcp, { arch, nr: table.connect! })).toBe(USER_NOTIF);
      // [level, optname] from socket(7) and tcp(7): binding to an interface refused, the rest not.
      const options: [string, number[], number][] = [
        ['SOL_SOCKET SO_BINDTODEVICE', [1, 25], EPERM],
        ['SOL_SOCKET SO_BINDTOIFINDEX', [1, 62], EPERM],
        ['SOL_SOCKET SO_KEEPALIVE', [1, 9], ALLOW],
        ['SOL_SOCKET SO_REUSEADDR', [1, 2], ALLOW],
        ['IPPROTO_TCP TCP_NODELAY', [6, 1], ALLOW],
        ['IPPROTO_TCP 25 (TCP_WINDOW_CLAMP, not a device)', [6, 25], ALLOW],
      ];
      for (const [name, [level, optname], decision] of options) {
        const args = [3, level!, optname!, 0, 4, 0];
        expect(runFilter(tcp, { arch, nr: table.setsockopt!, args }), name).toBe(decision);
      }
      const MSG_FASTOPEN = 0x20000000;
      const MSG_NOSIGNAL = 0x4000;
      const sends: [string, number][] = [
        ['sendto', 3],
        ['sendmsg', 2],
        ['sendmmsg', 3],
      ];
      for (const [call, flags] of sends) {
        const at = (value: number) => {
          const args = [3, 0, 0, 0, 0, 0];
          args[flags] = value;
          return runFilter(tcp, { arch, nr: table[call]!, args });
        };
        expect(at(MSG_NOSIGNAL), call).toBe(ALLOW);
        expect(at(MSG_FASTOPEN | MSG_NOSIGNAL), `${call} MSG_FASTOPEN`).toBe(EPERM);
      }
    },
  );

  it.each(arches)(
    'refuses truncate(2) by name only when asked (Landlock ABI 1-2)',
    ({ arch, table }) => {
      const refusing = buildSeccompProgram({ allowNetwork: false, refuseTruncateByName: true });
      expect(runFilter(refusing, { arch, nr: table.truncate! })).toBe(EPERM);
      expect(runFilter(refusing, { arch, nr: table.ftruncate! })).toBe(ALLOW);
      expect(runFilter(closed, { arch, nr: table.truncate! })).toBe(ALLOW);
    },
  );

  it('allowedSyscalls narrows: only the listed calls, argument rules still apply', () => {
    const program = buildSeccompProgram({
      allowNetwork: false,
      allowedSyscalls: ['read', 'write', 'socket', 'chmod'],
    });
    for (const { arch, table } of arches) {
      expect(runFilter(program, { arch, nr: table.read! })).toBe(ALLOW);
      expect(runFilter(program, { arch, nr: table.mkdirat! })).toBe(EPERM);
      expect(runFilter(program, { arch, nr: table.ptrace! })).toBe(EPERM);
      expect(runFilter(program, { arch, nr: table.clone3! })).toBe(ENOSYS);
      expect(runFilter(program, { arch, nr: table.socket!, args: [2] })).toBe(EPERM);
      expect(runFilter(program, { arch, nr: table.socket!, args: [1] })).toBe(ALLOW);
    }
    const chmod = x86_64Syscalls.chmod!;
    expect(runFilter(program, { arch: X86_64, nr: chmod, args: [0, 0o644] })).toBe(ALLOW);
    expect(runFilter(program, { arch: X86_64, nr: chmod, args: [0, 0o4755] })).toBe(EPERM);
  });

  it('extraSyscalls widens by name, and only for calls without argument rules', () => {
    const program = buildSeccompProgram({ allowNetwork: false, extraSyscalls: ['ptrace'] });
    for (const { arch, table } of arches) {
      expect(runFilter(program, { arch, nr: table.ptrace! })).toBe(ALLOW);
      expect(runFilter(program, { arch, nr: table.mount! })).toBe(EPERM);
    }
    expect(() => buildSeccompProgram({ allowNetwork: true, extraSyscalls: ['socket'] })).toThrow(
      /socket: decided by its arguments/,
    );
    expect(() => buildSeccompProgram({ allowNetwork: true, extraSyscalls: ['clone3'] })).toThrow(
      /clone3: refused with ENOSYS/,
    );
  });

  it('names only real calls, each in one place', () => {
    const { groups, argumentRules, probed, removedFromMoby } = seccompAllowlist;
    const plain = groups.flatMap((group) => group.names);
    const known = (name: string) => name in x86_64Syscalls || name in aarch64Syscalls;
    expect(plain.filter((name) => !known(name))).toEqual([]);
    expect(Object.keys(removedFromMoby).filter((name) => !known(name))).toEqual([]);
    const ruled = argumentRules.map((rule) => rule.syscall);
    const everywhere = [...plain, ...new Set(ruled), ...probed, ...Object.keys(removedFromMoby)];
    expect(everywhere.length).toBe(new Set(everywhere).size);
  });

  it('fits the kernel limit with every call allowed back', () => {
    const all = [...new Set([...Object.keys(x86_64Syscalls), ...Object.keys(aarch64Syscalls)])];
    const extra = all.filter((name) => extraSyscallProblem(name) === undefined);
    const program = buildSeccompProgram({ allowNetwork: true, extraSyscalls: extra });
    expect(program.length).toBeLessThanOrEqual(4096);
    expect(buildSeccompFilter({ allowNetwork: true, extraSyscalls: extra }).length).toBe(
      program.length * 8,
    );
  });

  it('encodes sock_filter entries byte for byte', () => {
    const bytes = encodeProgram([
      { code: 0x20, jt: 0, jf: 0, k: 4 },
      { code: 0x15, jt: 1, jf: 2, k: X86_64 },
      { code: 0x06, jt: 0, jf: 0, k: ALLOW },
    ]);
    expect(bytes.toString('hex')).toBe(
      '2000000004000000' + '150001023e0000c0' + '060000000000ff7f',
    );
    expect(() => encodeProgram([])).toThrow(RangeError);
    expect(() => encodeProgram([{ code: 0x15, jt: 256, jf: 0, k: 0 }])).toThrow(/255/);
  });
});
