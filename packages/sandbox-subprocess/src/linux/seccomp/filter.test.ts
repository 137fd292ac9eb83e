import { describe, expect, it } from 'vitest';
import { runFilter } from '../../../test/support/bpf-emulator.ts';
import { encodeProgram, SeccompRet } from './bpf.ts';
import { buildSeccompFilter, buildSeccompProgram, deniedSyscalls } from './filter.ts';
import { aarch64Syscalls } from './syscalls-aarch64.ts';
import { x86_64Syscalls } from './syscalls-x86-64.ts';

const X86_64 = 0xc000003e;
const AARCH64 = 0xc00000b7;
const I386 = 0x40000003;
const EPERM = SeccompRet.errno(1);
const ENOSYS = SeccompRet.errno(38);
const { ALLOW, KILL_PROCESS } = SeccompRet;
const arches = [
  { arch: X86_64, table: x86_64Syscalls },
  { arch: AARCH64, table: aarch64Syscalls },
];

describe('generated seccomp filter', () => {
  const open = buildSeccompProgram({ allowNetwork: true });
  const closed = buildSeccompProgram({ allowNetwork: false });

  it('kills other architectures and the x32 ABI', () => {
    expect(runFilter(open, { arch: I386, nr: 0 })).toBe(KILL_PROCESS);
    expect(runFilter(open, { arch: 0xdeadbeef, nr: 1 })).toBe(KILL_PROCESS);
    expect(runFilter(open, { arch: X86_64, nr: 0x40000000 + 1 })).toBe(KILL_PROCESS);
  });

  it.each(arches)('refuses every call of the deny list on arch %#', ({ arch, table }) => {
    let checked = 0;
    for (const name of deniedSyscalls) {
      const nr = table[name];
      if (nr === undefined) continue;
      expect(runFilter(open, { arch, nr }), name).toBe(EPERM);
      checked++;
    }
    expect(checked).toBeGreaterThan(50);
    expect(runFilter(open, { arch, nr: table.read! })).toBe(ALLOW);
    expect(runFilter(open, { arch, nr: table.clone3! })).toBe(ENOSYS);
  });

  it.each(arches)('refuses namespace clone flags and terminal injection', ({ arch, table }) => {
    const clone = table.clone!;
    expect(runFilter(open, { arch, nr: clone, args: [0x01200011] })).toBe(ALLOW); // fork-like
    expect(runFilter(open, { arch, nr: clone, args: [0x10000000] })).toBe(EPERM); // CLONE_NEWUSER
    expect(runFilter(open, { arch, nr: clone, args: [0x40000000 | 0x11] })).toBe(EPERM); // NEWNET
    const ioctl = table.ioctl!;
    expect(runFilter(open, { arch, nr: ioctl, args: [0, 0x5412] })).toBe(EPERM); // TIOCSTI
    expect(runFilter(open, { arch, nr: ioctl, args: [0, 0x541c] })).toBe(EPERM); // TIOCLINUX
    expect(runFilter(open, { arch, nr: ioctl, args: [0, 0x5401] })).toBe(ALLOW); // TCGETS
  });

  it.each(arches)('allows only AF_UNIX sockets when the network is off', ({ arch, table }) => {
    const socket = table.socket!;
    expect(runFilter(closed, { arch, nr: socket, args: [1] })).toBe(ALLOW);
    expect(runFilter(closed, { arch, nr: socket, args: [2] })).toBe(EPERM);
    expect(runFilter(closed, { arch, nr: socket, args: [10] })).toBe(EPERM);
    expect(runFilter(open, { arch, nr: socket, args: [2] })).toBe(ALLOW);
    expect(runFilter(open, { arch, nr: socket, args: [40] })).toBe(EPERM); // AF_VSOCK always
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
    'refuses truncate(2) by name only when asked (Landlock ABI 1-2)',
    ({ arch, table }) => {
      const refusing = buildSeccompProgram({ allowNetwork: false, refuseTruncateByName: true });
      expect(runFilter(refusing, { arch, nr: table.truncate! })).toBe(EPERM);
      expect(runFilter(refusing, { arch, nr: table.ftruncate! })).toBe(ALLOW);
      expect(runFilter(closed, { arch, nr: table.truncate! })).toBe(ALLOW);
    },
  );

  it('in allowlist mode allows only the listed calls, and the deny list still wins', () => {
    const program = buildSeccompProgram({
      allowNetwork: false,
      allowedSyscalls: ['read', 'write', 'ptrace', 'socket'],
    });
    for (const { arch, table } of arches) {
      expect(runFilter(program, { arch, nr: table.read! })).toBe(ALLOW);
      expect(runFilter(program, { arch, nr: table.mkdirat! })).toBe(EPERM);
      expect(runFilter(program, { arch, nr: table.ptrace! })).toBe(EPERM);
      expect(runFilter(program, { arch, nr: table.socket!, args: [2] })).toBe(EPERM);
      expect(runFilter(program, { arch, nr: table.socket!, args: [1] })).toBe(ALLOW);
    }
  });

  it('fits the kernel limit even with every syscall allowlisted', () => {
    const all = [...new Set([...Object.keys(x86_64Syscalls), ...Object.keys(aarch64Syscalls)])];
    const program = buildSeccompProgram({ allowNetwork: false, allowedSyscalls: all });
    expect(program.length).toBeLessThanOrEqual(4096);
    expect(buildSeccompFilter({ allowNetwork: false, allowedSyscalls: all }).length).toBe(
      program.length * 8,
    );
    const x86 = x86_64Syscalls;
    expect(runFilter(program, { arch: X86_64, nr: x86.openat! })).toBe(ALLOW);
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
