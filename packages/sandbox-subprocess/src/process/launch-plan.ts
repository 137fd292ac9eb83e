// What a platform module gets (one command, resolved) and gives back (the argv that confines it).

import type { RunCgroups } from '../linux/cgroup.ts';
import type { Launcher } from '../linux/launcher-pool.ts';
import type { PrestartedSandbox, PrestartPool } from '../linux/prestart-pool.ts';
import type { SubprocessPolicy } from '../policy/subprocess-policy.ts';
import type { Confinement } from './confinement.ts';
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

/**
 * One command, ready to be confined: paths are absolute, resolved (symlinks, `..`) and checked
 * (no symlink leads out of the directory that holds it, nothing inside a hidden path).
 */
export interface LaunchRequest {
  readonly policy: SubprocessPolicy;
  readonly limits: RunLimits;
  readonly executable: string;
  readonly args: readonly string[];
  /**
   * The cwd the call or the policy named, or undefined: then the command starts in its private
   * home under bubblewrap, and in the host's cwd where nothing confines it.
   */
  readonly cwd: string | undefined;
  /** Writable directory (resolved), when writes are allowed and a directory is named. */
  readonly writableDirectory: string | undefined;
  /** Field name of the writable directory (`restrictToDirectory` or `cwd`), for errors. */
  readonly writableField: string | undefined;
  /** The call's and the policy's read-only paths, as [field, real path]. */
  readonly readOnlyPaths: readonly (readonly [string, string])[];
  /** The policy's writable paths, as [field, real path]. */
  readonly writablePaths: readonly (readonly [string, string])[];
  /** Unix sockets the policy allows, as [field, real path]. */
  readonly unixSockets: readonly (readonly [string, string])[];
  /**
   * How the run reaches its egress proxy when the policy has a `network` allowlist: the plan
   * opens the listener its backend needs.
   */
  readonly egress?: EgressEndpoints | undefined;
  /**
   * The run's egress proxy socket (host path), set by the Linux plan for bubblewrap: the
   * command gets its own network namespace, the socket bound in and a forwarder to it.
   */
  readonly egressSocket?: string | undefined;
  /** Real paths of the policy's hidePaths that exist. */
  readonly hiddenPaths: readonly string[];
  readonly extraPipes: number;
  /** PATH used to find bwrap (the host's). */
  readonly hostPath: string | undefined;
  /** The command's whole environment. */
  readonly env: Readonly<Record<string, string>>;
  /** Start cold, without a pooled launcher: spawnSync (`execSync`), or a line a launcher cannot read. */
  readonly synchronous?: boolean | undefined;
  /** The calling sandbox's pre-started sandboxes (Linux, bubblewrap), when it keeps them. */
  readonly prestart?: PrestartPool | undefined;
}

/** The two ways a run can reach its egress proxy; a plan opens one of them, once. */
export interface EgressEndpoints {
  /** Opens the run's listener on a Unix socket; returns its host path (bound into bubblewrap). */
  unixSocket(): string;
  /** Opens the run's listener on 127.0.0.1 (the Landlock backend); resolves with its port. */
  loopbackPort(): Promise<number>;
}

/** The argv to spawn and what it enforces. */
export interface LaunchPlan {
  readonly file: string;
  readonly args: readonly string[];
  readonly controls: readonly SandboxControl[];
  readonly sandboxApplied: boolean;
  /** The backend that confines the command (see {@link Confinement}). */
  readonly confinement: Confinement;
  /** Where to start `file` on the host. */
  readonly cwd: string;
  /** The environment `file` starts with: the command's where nothing else runs first, else none. */
  readonly env: Readonly<Record<string, string>>;
  /**
   * Bytes for the descriptors right after the extra pipes (Linux): bwrap's seccomp program,
   * then the wrapper's instructions and bwrap's arguments. Written by the host after spawn; a
   * promise is written once it resolves (the Landlock applier's instructions wait for the egress
   * proxy's port), and a rejected one ends its pipe empty (the run fails its setup).
   */
  readonly inputs?: readonly (Uint8Array | Promise<Uint8Array>)[] | undefined;
  /**
   * Whether the descriptor after the inputs carries the start byte (Linux): a run that exits
   * without it never started, and is reported `UNAVAILABLE` with what its setup wrote.
   */
  readonly startMarker?: boolean | undefined;
  /** Host directories the command may write (Linux): swept for set-id files after the run. */
  readonly writableDirs?: readonly string[] | undefined;
  /** Frees what the plan holds besides cgroups (pinned path descriptors); safe to call twice. */
  readonly release?: (() => void) | undefined;
  readonly cgroups: RunCgroups | undefined;
  /** Start the command in its own process group (and session) so the group can be killed. */
  readonly detached: boolean;
  /** Why full confinement does not apply, when it does not. */
  readonly fallbackReason: string | undefined;
  /**
   * A pooled launcher already inside the run's cgroups (Linux): instead of spawning `file`,
   * write `inputs` to its descriptors, and it becomes the command.
   */
  readonly launcher?: Launcher | undefined;
  /**
   * A pre-started sandbox (Linux): `launcher` is its wrapper, whose inputs were written when it
   * started; the run sends it only `message` (cwd, environment, argv) and reads its start byte.
   */
  readonly prestarted?:
    | { readonly sandbox: PrestartedSandbox; readonly message: Uint8Array }
    | undefined;
  /** Called once the run has ended (after its result): refills the pre-started sandboxes. */
  readonly afterExit?: (() => void) | undefined;
  /** Text given to the command's stdin before the caller's (the Windows wrapper script). */
  readonly stdinPrefix?: string | undefined;
}
