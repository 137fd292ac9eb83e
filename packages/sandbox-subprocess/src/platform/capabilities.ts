// What confinement this host offers, without running a command: lets a caller choose its limits
// (a parser host that starts Node must not get RLIMIT_DATA under ~1 GiB) before it spawns.
import { detectCgroups } from '../linux/cgroup.ts';
import { detectLinux } from '../linux/detect.ts';
import type { Platform } from './platform.ts';

/** How `maxMemoryMb` is enforced (with the default `memoryFallback: 'rlimit-data'`). */
export type MemoryMechanism =
  | 'cgroup-v2'
  | 'cgroup-v1'
  /** RLIMIT_DATA: stops V8, Go and JVM programs from starting under about 1 GiB. */
  | 'rlimit-data'
  | 'job-object'
  /** macOS `ulimit -d` (RLIMIT_DATA), set by the wrapper shell. */
  | 'ulimit'
  | 'none';

/** What a {@link SubprocessSandbox} can enforce on this host under its current policy. */
export interface SandboxCapabilities {
  /** The platform these capabilities are for. */
  readonly platform: Platform;
  /** Runs are OS-confined (bubblewrap, Seatbelt or a Job Object), not only limited. */
  readonly confined: boolean;
  /** Linux: a working bubblewrap was found on PATH. */
  readonly bubblewrap: boolean;
  /** Linux: the generated seccomp filter applies (it rides on bubblewrap). */
  readonly seccomp: boolean;
  /** Linux: bubblewrap can create a network namespace (for `allowNetwork: false`). */
  readonly networkNamespace: boolean;
  /** What enforces `maxMemoryMb`. */
  readonly memoryMechanism: MemoryMechanism;
  /** Linux: a pids cgroup bounds processes and threads (else RLIMIT_NPROC, or nothing as root). */
  readonly pidsCgroup: boolean;
  /** Linux: a per-run cgroup lets a timeout kill setsid daemons and double forks too. */
  readonly cgroupKill: boolean;
  /** Why runs are not confined, when they are not. */
  readonly reason: string | undefined;
}

/** Detects the capabilities (each probe runs once per process and is cached). */
export function detectCapabilities(
  platform: Platform,
  enabled: boolean,
  hostPath: string | undefined = process.env.PATH,
): SandboxCapabilities {
  const none: SandboxCapabilities = {
    platform,
    confined: false,
    bubblewrap: false,
    seccomp: false,
    networkNamespace: false,
    memoryMechanism: 'none',
    pidsCgroup: false,
    cgroupKill: false,
    reason: 'sandbox disabled by policy',
  };
  if (!enabled) return none;
  switch (platform) {
    case 'linux': {
      const linux = detectLinux(hostPath);
      const cgroups = detectCgroups();
      const bubblewrap = linux.bwrap !== undefined;
      return {
        platform,
        confined: bubblewrap,
        bubblewrap,
        seccomp: bubblewrap,
        networkNamespace: bubblewrap && linux.networkNamespace,
        memoryMechanism:
          cgroups.memory === undefined ? 'rlimit-data' : `cgroup-v${cgroups.memory.version}`,
        pidsCgroup: cgroups.pids !== undefined,
        cgroupKill: cgroups.memory !== undefined || cgroups.pids !== undefined,
        reason: linux.reason,
      };
    }
    case 'darwin':
      // Untested on a real Mac, like the rest of the macOS path: Seatbelt is assumed present.
      return { ...none, confined: true, memoryMechanism: 'ulimit', reason: undefined };
    case 'win32':
      return { ...none, confined: true, memoryMechanism: 'job-object', reason: undefined };
    default:
      return { ...none, reason: `no sandbox for ${process.platform}` };
  }
}
