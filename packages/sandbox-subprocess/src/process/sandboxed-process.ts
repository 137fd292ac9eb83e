// The streaming handle `spawn` returns.

import type { Duplex, Readable, Writable } from 'node:stream';
import type { NetworkActivity } from '../egress/egress-session.ts';
import type { Platform } from '../platform/platform.ts';
import type { Confinement } from './confinement.ts';
import type { SandboxControl } from './controls.ts';

/** How a confined command ended. */
export interface ProcessExit {
  /** Exit code of the command (under bubblewrap, 128 + n when signal n ended it); null if none. */
  readonly exitCode: number | null;
  /** Signal that ended the outermost process, if any (`SIGKILL` after a timeout). */
  readonly signal: string | null;
  /** The wall-clock limit ended it. */
  readonly timedOut: boolean;
  /** The caller's AbortSignal or `kill()` ended it. */
  readonly cancelled: boolean;
  /** The memory cgroup recorded that the limit was hit (cgroup mechanisms only). */
  readonly memoryExceeded: boolean;
  /** Milliseconds from spawn to exit. */
  readonly durationMs: number;
  /** Why the process could not run or ended abnormally, in words, when it did. */
  readonly error?: string;
  /**
   * The confinement could not be set up (bubblewrap, setpriv or the view failed) and the
   * command never started: its stderr says why. Its `controls` were not applied.
   */
  readonly setupFailed?: boolean;
  /**
   * Set when the run's writable directories were checked after it for set-user-id and
   * set-group-id files (Linux): `complete` when every entry was, `cleared` the paths whose bits
   * were removed.
   */
  readonly setIdSweep?: {
    /** Every entry was checked (the walk stops past 50 000 entries or at an unreadable one). */
    readonly complete: boolean;
    /** Paths whose set-id bits were removed. */
    readonly cleared: readonly string[];
  };
}

/** A command running under the policy; see {@link SubprocessSandbox.spawn}. */
export interface SandboxedProcess {
  /** PID of the outermost process (the confinement wrapper, not the command itself). */
  readonly pid: number | undefined;
  /** The command's stdin; end it when the command should see end of input. */
  readonly stdin: Writable;
  /** The command's stdout, unbounded: cap what you keep (`run` does, at `maxOutputBytes`). */
  readonly stdout: Readable;
  /** The command's stderr, unbounded like `stdout`. */
  readonly stderr: Readable;
  /** Host ends of the extra pipes: `pipes[0]` is the command's fd 3. */
  readonly pipes: readonly Duplex[];
  /**
   * Controls this process was started under. They hold once the command itself started: an exit
   * with `setupFailed` means none applied (`run`'s result then lists none).
   */
  readonly controls: readonly SandboxControl[];
  /** Whether OS confinement (bubblewrap, Landlock, Seatbelt, Job Object) applies, not only limits. */
  readonly sandboxApplied: boolean;
  /** The backend that confines the command (see {@link Confinement}). */
  readonly confinement: Confinement;
  /** The platform whose confinement runs the command. */
  readonly platform: Platform;
  /**
   * Resolves once everything the command started is gone; never rejects. The last of the
   * command's output may still be on its way then: `stdout` and `stderr` end by themselves soon
   * after (nothing is left to hold them open), so read them to their `end` for all of it. It does
   * not wait for them, since output nobody reads would keep it pending.
   */
  readonly exited: Promise<ProcessExit>;
  /**
   * With a network allowlist: the run's network activity, an `event` for each connection the
   * proxy allows or refuses as it happens, and `report()`. Undefined without one.
   */
  readonly network?: NetworkActivity | undefined;
  /** Kills everything the command started (the exit reports `cancelled: true`). */
  kill(): void;
}
