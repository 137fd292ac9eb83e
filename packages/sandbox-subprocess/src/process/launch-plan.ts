// What a platform module gets (one command, resolved) and gives back (the argv that confines it).

import type { RunCgroups } from '../linux/cgroup.ts';
import type { Launcher } from '../linux/launcher-pool.ts';
import type { SubprocessPolicy } from '../policy/subprocess-policy.ts';
import type { SandboxControl } from './controls.ts';

/** Limits of one run: the policy's, with the call's overrides applied. */
export interface RunLimits {
  readonly timeoutMs: number;
  readonly maxMemoryMb: number;
  /** CPU seconds; 0 for none. */
  readonly cpuSecs: number;
  readonly rlimits: SubprocessPolicy['rlimits'];
  /** What applies when `maxMemoryMb` is set and no memory cgroup is writable (Linux). */
  readonly memoryFallback: MemoryFallback;
}

/** See the `memoryFallback` spawn option. */
export type MemoryFallback = 'rlimit-data' | 'none' | 'refuse';

/** One command, ready to be confined: paths are absolute and resolved (symlinks, `..`). */
export interface LaunchRequest {
  readonly policy: SubprocessPolicy;
  readonly limits: RunLimits;
  readonly executable: string;
  readonly args: readonly string[];
  readonly cwd: string;
  /** Writable directory (resolved), when writes are allowed. */
  readonly writableDirectory: string | undefined;
  readonly readOnlyPaths: readonly string[];
  readonly extraPipes: number;
  /** PATH used to find bwrap and prlimit (the host's). */
  readonly hostPath: string | undefined;
  /** The command's whole environment. */
  readonly env: Readonly<Record<string, string>>;
  /** Start cold, without a pooled launcher: spawnSync (`execSync`), or a line a launcher cannot read. */
  readonly synchronous?: boolean | undefined;
}

/** The argv to spawn and what it enforces. */
export interface LaunchPlan {
  readonly file: string;
  readonly args: readonly string[];
  readonly controls: readonly SandboxControl[];
  readonly sandboxApplied: boolean;
  /** A descriptor to pass right after the extra pipes (bwrap's `--seccomp`); closed after spawn. */
  readonly seccompFd: number | undefined;
  readonly cgroups: RunCgroups | undefined;
  /** Start the command in its own process group (and session) so the group can be killed. */
  readonly detached: boolean;
  /** Why full confinement does not apply, when it does not. */
  readonly fallbackReason: string | undefined;
  /**
   * A pooled launcher already inside the run's cgroups (Linux): instead of spawning `file`,
   * write `line` to its stdin, and it becomes the command.
   */
  readonly launcher?: { readonly launcher: Launcher; readonly line: string } | undefined;
  /** Text given to the command's stdin before the caller's (the Windows wrapper script). */
  readonly stdinPrefix?: string | undefined;
}
