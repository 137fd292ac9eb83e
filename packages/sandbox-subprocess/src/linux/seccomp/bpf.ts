// A tiny classic-BPF assembler for seccomp programs: instructions, labels for long jumps, and the
// raw `struct sock_filter[]` encoding that `bwrap --seccomp FD` reads.
import { endianness } from 'node:os';

/** One classic BPF instruction (`struct sock_filter`). */
export interface BpfInstruction {
  readonly code: number;
  readonly jt: number;
  readonly jf: number;
  readonly k: number;
}

/** Opcodes used by the generated programs (linux/bpf_common.h). */
export const Op = {
  /** A = *(u32 *)(seccomp_data + k) */
  LD_W_ABS: 0x20,
  /** A &= k */
  AND_K: 0x54,
  /** if (A == k) jump jt else jump jf */
  JEQ_K: 0x15,
  /** if (A >= k) jump jt else jump jf */
  JGE_K: 0x35,
  /** if (A & k) jump jt else jump jf */
  JSET_K: 0x45,
  /** jump k (32-bit offset, unconditional) */
  JA: 0x05,
  /** return k */
  RET_K: 0x06,
} as const;

/** Return values of a seccomp filter (linux/seccomp.h). */
export const SeccompRet = {
  KILL_PROCESS: 0x80000000,
  ALLOW: 0x7fff0000,
  /** Ask the filter's listener (a supervisor) to decide the call. */
  USER_NOTIF: 0x7fc00000,
  /** ERRNO with the errno in the low 16 bits. */
  errno: (errno: number): number => (0x00050000 | (errno & 0xffff)) >>> 0,
} as const;

/** Offsets in `struct seccomp_data`. */
export const SeccompData = {
  nr: 0,
  arch: 4,
  /** Low 32 bits of argument `index` on a little-endian machine. */
  argLow: (index: number): number => 16 + 8 * index,
  /** The high 32 bits of argument `index` (both supported architectures are little-endian). */
  argHigh: (index: number): number => 20 + 8 * index,
} as const;

/** The kernel refuses programs longer than this (BPF_MAXINSNS). */
export const maxInstructions = 4096;

/** Builds `struct sock_filter` entries. */
export const bpf = {
  load: (offset: number): BpfInstruction => ({ code: Op.LD_W_ABS, jt: 0, jf: 0, k: offset }),
  and: (k: number): BpfInstruction => ({ code: Op.AND_K, jt: 0, jf: 0, k: k >>> 0 }),
  jeq: (k: number, jt: number, jf: number): BpfInstruction => ({ code: Op.JEQ_K, jt, jf, k }),
  jge: (k: number, jt: number, jf: number): BpfInstruction => ({ code: Op.JGE_K, jt, jf, k }),
  jset: (k: number, jt: number, jf: number): BpfInstruction => ({ code: Op.JSET_K, jt, jf, k }),
  ja: (k: number): BpfInstruction => ({ code: Op.JA, jt: 0, jf: 0, k }),
  ret: (k: number): BpfInstruction => ({ code: Op.RET_K, jt: 0, jf: 0, k: k >>> 0 }),
} as const;

/**
 * Encodes a program as the kernel reads it: 8 bytes per instruction (u16 code, u8 jt, u8 jf,
 * u32 k) in the machine's byte order. Throws when the program could not be loaded.
 */
export function encodeProgram(program: readonly BpfInstruction[]): Buffer {
  if (program.length === 0 || program.length > maxInstructions) {
    throw new RangeError(`seccomp program has ${program.length} instructions (1-4096 allowed)`);
  }
  const little = endianness() === 'LE';
  const buffer = Buffer.alloc(program.length * 8);
  program.forEach((instruction, index) => {
    const at = index * 8;
    if (instruction.jt > 255 || instruction.jf > 255) {
      throw new RangeError(`seccomp instruction ${index} jumps further than 255`);
    }
    if (little) buffer.writeUInt16LE(instruction.code, at);
    else buffer.writeUInt16BE(instruction.code, at);
    buffer.writeUInt8(instruction.jt, at + 2);
    buffer.writeUInt8(instruction.jf, at + 3);
    if (little) buffer.writeUInt32LE(instruction.k >>> 0, at + 4);
    else buffer.writeUInt32BE(instruction.k >>> 0, at + 4);
  });
  return buffer;
}
