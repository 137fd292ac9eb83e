// `ulimit` steps for the wrapper shell of Linux and macOS runs.
import { SandboxControl } from './controls.ts';
import type { RunLimits } from './launch-plan.ts';

/** Which optional limits the shell sets. */
export interface UlimitChoices {
  /** Set RLIMIT_DATA to the memory limit (when no better memory mechanism applies). */
  readonly data: boolean;
  /** The shell's flag for RLIMIT_NPROC (`-u` in bash; dash uses `-p`), or none. */
  readonly nprocFlag?: '-u' | undefined;
  /** The unit of `-f`: 512 bytes in POSIX shells, 1024 in bash outside POSIX mode. */
  readonly fileBlockBytes?: 512 | 1024 | undefined;
}

/**
 * `ulimit` steps with the flags POSIX shells share (dash, bash, busybox ash): -t CPU seconds,
 * -n open files, -f and -c in 512-byte blocks, -d in KiB. Without -S/-H both the soft and the
 * hard limit are set, so the command cannot raise them again. The CPU limit is the exception:
 * its hard limit is one second above the soft one, so the kernel ends a command at the limit
 * with SIGXCPU (reported as `TIMEOUT`) rather than an anonymous SIGKILL, which it sends at the
 * hard limit. Pushes what applies to `controls`.
 */
export function ulimitSteps(
  limits: RunLimits,
  choices: UlimitChoices,
  controls: SandboxControl[],
): string[] {
  const steps: string[] = [];
  if (limits.cpuSecs > 0) {
    // Soft first: a hard limit below the current (unlimited) soft one is refused.
    steps.push(`ulimit -S -t ${limits.cpuSecs}`, `ulimit -H -t ${limits.cpuSecs + 1}`);
    controls.push(SandboxControl.rlimitCpu);
  }
  steps.push(
    `ulimit -n ${limits.rlimits.openFiles}`,
    `ulimit -f ${Math.max(1, Math.floor(limits.rlimits.fileSizeBytes / (choices.fileBlockBytes ?? 512)))}`,
    'ulimit -c 0',
  );
  controls.push(SandboxControl.rlimitNofile, SandboxControl.rlimitFsize, SandboxControl.rlimitCore);
  if (choices.nprocFlag !== undefined) {
    steps.push(`ulimit ${choices.nprocFlag} ${limits.rlimits.processes}`);
    controls.push(SandboxControl.rlimitNproc);
  }
  if (choices.data && limits.maxMemoryMb > 0) {
    steps.push(`ulimit -d ${limits.maxMemoryMb * 1024}`);
    controls.push(SandboxControl.rlimitData);
  }
  return steps;
}
