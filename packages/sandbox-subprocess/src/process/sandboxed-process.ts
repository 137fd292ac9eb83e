// The streaming handle `spawn` returns.
import type { Duplex, Readable, Writable } from 'node:stream';
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
  /** Controls enforced for this process. */
  readonly controls: readonly SandboxControl[];
  /** Whether OS confinement (bubblewrap, Landlock, Seatbelt, Job Object) applies, not only limits. */
  readonly sandboxApplied: boolean;
  /** The backend that confines the command (see {@link Confinement}). */
  readonly confinement: Confinement;
  /** The platform whose confinement runs the command. */
  readonly platform: Platform;
  /** Resolves once everything the command started is gone; never rejects. */
  readonly exited: Promise<ProcessExit>;
  /** Kills everything the command started (the exit reports `cancelled: true`). */
  kill(): void;
}
