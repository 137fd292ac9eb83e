// What confinement this host offers, without running a command: lets a caller choose its limits
// (a parser host that starts Node must not get RLIMIT_DATA under ~1 GiB) before it spawns.

import { chooseBackend } from '../linux/backend-choice.ts';
import { detectCgroups } from '../linux/cgroup.ts';
import type { SubprocessPolicy } from '../policy/subprocess-policy.ts';
import type { Confinement } from '../process/confinement.ts';
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
  /** Runs are OS-confined (bubblewrap, Landlock, Seatbelt or a Job Object), not only limited. */
  readonly confined: boolean;
  /**
   * The backend runs get under the current policy (on Linux the strongest the probe found, see
   * `minimumConfinement`); `none` when the policy disables confinement.
   */
  readonly confinement: Confinement;
  /** Linux: runs use bubblewrap (the `bubblewrap` or `bubblewrap-as-caller` backend). */
  readonly bubblewrap: boolean;
  /** Linux: the generated seccomp filter applies (under bubblewrap or the Landlock backend). */
  readonly seccomp: boolean;
  /** Linux: bubblewrap can create a network namespace (for `allowNetwork: false`). */
  readonly networkNamespace: boolean;
  /** What enforces `maxMemoryMb`. */
  readonly memoryMechanism: MemoryMechanism;
  /** Linux: a pids cgroup bounds processes and threads (else RLIMIT_NPROC, or nothing as root). */
  readonly pidsCgroup: boolean;
  /** Linux: a per-run cgroup lets a timeout kill setsid daemons and double forks too. */
  readonly cgroupKill: boolean;
  /** Why runs do not get the strongest backend (every reason on the way down), when they do not. */
  readonly reason: string | undefined;
}

/** Detects the capabilities (each probe runs once per process and is cached). */
export function detectCapabilities(
  platform: Platform,
  policy: Pick<SubprocessPolicy, 'enabled' | 'runAs'>,
  hostPath: string | undefined = process.env.PATH,
): SandboxCapabilities {
  const none: SandboxCapabilities = {
    platform,
    confined: false,
    confinement: 'none',
    bubblewrap: false,
    seccomp: false,
    networkNamespace: false,
    memoryMechanism: 'none',
    pidsCgroup: false,
    cgroupKill: false,
    reason: 'sandbox disabled by policy',
  };
  if (!policy.enabled) return none;
  switch (platform) {
    case 'linux': {
      const choice = chooseBackend(policy, hostPath);
      const cgroups = detectCgroups();
      const bubblewrap = choice.backend.startsWith('bubblewrap');
      const confined = choice.backend !== 'rlimits';
      return {
        platform,
        confined,
        confinement: choice.backend,
        bubblewrap,
        seccomp: confined,
        networkNamespace: bubblewrap && choice.bwrap.networkNamespace,
        memoryMechanism:
          cgroups.memory === undefined ? 'rlimit-data' : `cgroup-v${cgroups.memory.version}`,
        pidsCgroup: cgroups.pids !== undefined,
        cgroupKill: cgroups.memory !== undefined || cgroups.pids !== undefined,
        reason: choice.reasons.length > 0 ? choice.reasons.join('; ') : undefined,
      };
    }
    case 'darwin':
      // Untested on a real Mac, like the rest of the macOS path: Seatbelt is assumed present.
      return {
        ...none,
        confined: true,
        confinement: 'seatbelt',
        memoryMechanism: 'ulimit',
        reason: undefined,
      };
    case 'win32':
      return {
        ...none,
        confined: true,
        confinement: 'job-object',
        memoryMechanism: 'job-object',
        reason: undefined,
      };
    default:
      return { ...none, reason: `no sandbox for ${process.platform}` };
  }
}
