// Runs a classic-BPF seccomp program on a given syscall, so the filter's decisions can be
// checked exactly for both architectures without a kernel of each kind.
import { type BpfInstruction, Op } from '../../src/linux/seccomp/bpf.ts';

/** One syscall as the kernel presents it to the filter. */
export interface SyscallData {
  arch: number;
  nr: number;
  args?: number[];
}

/** Returns what the program decides (the RET value). */
export function runFilter(program: readonly BpfInstruction[], data: SyscallData): number {
  const words = new Map<number, number>([
    [0, data.nr >>> 0],
    [4, data.arch >>> 0],
  ]);
  (data.args ?? []).forEach((arg, index) => {
    words.set(16 + 8 * index, arg >>> 0);
    words.set(20 + 8 * index, 0);
  });
  let a = 0;
  let pc = 0;
  for (let steps = 0; steps < 10_000; steps++) {
    const ins = program[pc];
    if (ins === undefined) throw new Error(`fell off the program at ${pc}`);
    switch (ins.code) {
      case Op.LD_W_ABS:
        a = words.get(ins.k) ?? 0;
        pc++;
        break;
      case Op.JEQ_K:
        pc += 1 + (a === ins.k >>> 0 ? ins.jt : ins.jf);
        break;
      case Op.JGE_K:
        pc += 1 + (a >= ins.k >>> 0 ? ins.jt : ins.jf);
        break;
      case Op.JSET_K:
        pc += 1 + ((a & ins.k) !== 0 ? ins.jt : ins.jf);
        break;
      case Op.ALU_AND_K:
        a = (a & ins.k) >>> 0;
        pc++;
        break;
      case Op.JA:
        pc += 1 + ins.k;
        break;
      case Op.RET_K:
        return ins.k >>> 0;
      default:
        throw new Error(`unknown opcode ${ins.code}`);
    }
  }
  throw new Error('program did not return');
}
