// What `run`, `exec` and `execSync` return: how the command ended, what it wrote, which controls
// were enforced and, when it failed, a code from core's table.
import { availableParallelism, constants } from 'node:os';
import type { NetworkReport, SandboxErrorCode } from '@coda/sandbox-core';
import type { Platform } from '../platform/platform.ts';
import type { Confinement } from './confinement.ts';
import { SandboxControl } from './controls.ts';
import type { ProcessExit } from './sandboxed-process.ts';

/**
 * Why a command did not succeed, from core's {@link SandboxErrorCode} table: `TIMEOUT` (the
 * wall-clock limit, or SIGXCPU from the CPU limit), `OOM` (the memory cgroup recorded the limit),
 * `CANCELLED` (the caller's AbortSignal or `kill()`), `LIMIT_EXCEEDED` (output beyond
 * `maxOutputBytes` ended an `execSync`, or SIGXFSZ from the file size limit), `CRASH` (another
 * signal ended it, such as SIGKILL or SIGSEGV; under bubblewrap, exit code 128 + n of such a
 * signal), `RUNTIME` (it exited with another non-zero code), `UNAVAILABLE` (it never started:
 * a missing program, a strict policy this host cannot meet, a closed sandbox, a failed spawn).
 */
export type SandboxFailureCode = Extract<
  SandboxErrorCode,
  'TIMEOUT' | 'OOM' | 'CANCELLED' | 'LIMIT_EXCEEDED' | 'CRASH' | 'RUNTIME' | 'UNAVAILABLE'
>;

/** What every result says, whether the command succeeded or not. */
export interface SandboxResultFields {
  /** What the command wrote to stdout (UTF-8), up to `maxOutputBytes`. */
  readonly stdout: string;
  /** What the command wrote to stderr (UTF-8), up to `maxOutputBytes`. */
  readonly stderr: string;
  /**
   * Exit code of the command (under bubblewrap, 128 + n when signal n ended it); null when a
   * signal ended the outermost process or the command never started.
   */
  readonly exitCode: number | null;
  /** Whether OS confinement applied (bubblewrap, Landlock, Seatbelt, Job Object), not only limits. */
  readonly sandboxApplied: boolean;
  /**
   * The backend that confined the command (`bubblewrap`, `bubblewrap-as-caller`, `landlock`,
   * `rlimits` on Linux; `seatbelt`; `job-object`), or `none` (disabled, or never started).
   */
  readonly confinement: Confinement;
  /** The platform whose confinement ran the command. */
  readonly platform: Platform;
  /** Signal that ended the outermost process, if any (`SIGKILL` after a timeout). */
  readonly signal: string | null;
  /** Whether the wall-clock limit ended the command. */
  readonly timedOut: boolean;
  /** Whether the caller's AbortSignal ended the command. */
  readonly cancelled: boolean;
  /** Whether the memory cgroup recorded that the limit was hit (cgroup mechanisms only). */
  readonly memoryExceeded: boolean;
  /** Milliseconds from spawn to exit; 0 when the command never started. */
  readonly durationMs: number;
  /** More than `maxOutputBytes` was written to stdout; the rest was dropped. */
  readonly stdoutTruncated: boolean;
  /** More than `maxOutputBytes` was written to stderr; the rest was dropped. */
  readonly stderrTruncated: boolean;
  /** Controls enforced for this run; empty when the command never started. */
  readonly controls: readonly SandboxControl[];
  /**
   * With a network allowlist: the hosts reached (bytes per host) and the connections refused,
   * each with its reason. Undefined without one.
   */
  readonly network?: NetworkReport | undefined;
}

/** A command that exited with code 0, within its limits and not cancelled. */
export interface SandboxSuccess extends SandboxResultFields {
  /** Always `true`: the discriminant of {@link SandboxResult}. */
  readonly success: true;
  /** Always 0. */
  readonly exitCode: 0;
  /** Never set on a success. */
  readonly error?: never;
  /** Never set on a success. */
  readonly code?: never;
}

/** A command that failed, ran over a limit, was cancelled or never started. */
export interface SandboxFailure extends SandboxResultFields {
  /** Always `false`: the discriminant of {@link SandboxResult}. */
  readonly success: false;
  /** Why it did not succeed, in words (`Command timed out after 1000 ms`). */
  readonly error: string;
  /** Why it did not succeed, as a stable code to switch on; see {@link SandboxFailureCode}. */
  readonly code: SandboxFailureCode;
}

/**
 * The outcome of one command. A failing command is a result, never a throw: check `success`,
 * then `code` (`if (!result.success) result.code` type-checks and narrows).
 */
export type SandboxResult = SandboxSuccess | SandboxFailure;

/** The outcome fields that do not depend on the output. */
export interface ResultBase {
  readonly sandboxApplied: boolean;
  readonly confinement: Confinement;
  readonly platform: Platform;
  readonly controls: readonly SandboxControl[];
}

/** The run's limits a result names or checks its ending against. */
export interface ResultLimits {
  readonly timeoutMs: number;
  readonly maxMemoryMb: number;
  /** RLIMIT_CPU's soft limit in seconds; 0 for none. */
  readonly cpuSecs: number;
}

/** How the process ended, with the code of a failure the exit alone cannot tell (output overflow). */
export type ResultExit = ProcessExit & { readonly failureCode?: SandboxFailureCode };

/** Builds a result from how the process ended and what it wrote. */
export function toResult(
  base: ResultBase,
  exit: ResultExit,
  output: { stdout: string; stderr: string; stdoutTruncated: boolean; stderrTruncated: boolean },
  limits: ResultLimits,
): SandboxResult {
  if (exit.setupFailed === true) return setupFailedResult(base, exit, output);
  const fields = {
    ...output,
    sandboxApplied: base.sandboxApplied,
    confinement: base.confinement,
    platform: base.platform,
    signal: exit.signal,
    timedOut: exit.timedOut,
    cancelled: exit.cancelled,
    memoryExceeded: exit.memoryExceeded,
    durationMs: exit.durationMs,
    controls:
      exit.setIdSweep?.complete === true
        ? [...base.controls, SandboxControl.noSetIdFiles]
        : base.controls,
  };
  const failure = describeFailure(exit, limits, base);
  if (failure === undefined) return { success: true, exitCode: 0, ...fields };
  return { success: false, exitCode: exit.exitCode, ...failure, ...fields };
}

/** A result for a command that never started (missing program, strict refusal, closed sandbox). */
export function notStartedResult(base: ResultBase, error: string): SandboxFailure {
  return {
    success: false,
    code: 'UNAVAILABLE',
    error,
    stdout: '',
    stderr: '',
    exitCode: null,
    sandboxApplied: base.sandboxApplied,
    confinement: base.confinement,
    platform: base.platform,
    signal: null,
    timedOut: false,
    cancelled: false,
    memoryExceeded: false,
    durationMs: 0,
    stdoutTruncated: false,
    stderrTruncated: false,
    controls: base.controls,
  };
}

/**
 * A run whose confinement could not be set up (bubblewrap, setpriv or the view failed, so the
 * start byte never came): `UNAVAILABLE`, nothing applied, and the setup's own words as reason.
 */
function setupFailedResult(
  base: ResultBase,
  exit: ResultExit,
  output: { stdout: string; stderr: string; stdoutTruncated: boolean; stderrTruncated: boolean },
): SandboxFailure {
  const reason = output.stderr.trim().split('\n')[0] || `exit code ${exit.exitCode}`;
  return {
    ...notStartedResult(
      { ...base, sandboxApplied: false, confinement: 'none', controls: [] },
      `The sandbox could not be set up, so the command never started: ${reason}`,
    ),
    ...output,
    exitCode: exit.exitCode,
    signal: exit.signal,
    durationMs: exit.durationMs,
  };
}

/** Why the command failed, in words and as a code, or undefined when it succeeded. */
function describeFailure(
  exit: ResultExit,
  limits: ResultLimits,
  base: ResultBase,
): { error: string; code: SandboxFailureCode } | undefined {
  if (exit.error !== undefined) {
    return { error: exit.error, code: exit.failureCode ?? 'UNAVAILABLE' };
  }
  if (exit.timedOut) {
    return { error: `Command timed out after ${limits.timeoutMs} ms`, code: 'TIMEOUT' };
  }
  if (exit.cancelled) return { error: 'Command was cancelled', code: 'CANCELLED' };
  if (exit.exitCode === 0) return undefined;
  if (exit.memoryExceeded) {
    return { error: `Command exceeded its memory limit (${limits.maxMemoryMb} MiB)`, code: 'OOM' };
  }
  const signal = exit.signal ?? signalInExitCode(exit.exitCode, base);
  // SIGXCPU names the CPU limit only when the command can have used it: the kernel sends it to
  // a process whose own CPU time reached `cpuSecs`, which takes at least cpuSecs / cores of wall
  // time. Sooner, the command (or another of the run's processes) sent it, or under bubblewrap
  // exited with 152 itself, which reads the same (found by an attack review: a self-sent SIGXCPU
  // after 36 ms read as the CPU limit).
  if (signal === 'SIGXCPU' && !cpuLimitReachable(exit.durationMs, limits.cpuSecs)) {
    return { error: 'Command was killed with SIGXCPU (not by its CPU time limit)', code: 'CRASH' };
  }
  if (signal !== null) {
    const known = endingSignals.find((entry) => entry.signal === signal);
    const why = known?.limit === undefined ? '' : ` (${known.limit})`;
    return { error: `Command was killed with ${signal}${why}`, code: known?.code ?? 'CRASH' };
  }
  return { error: `Command failed with exit code ${exit.exitCode}`, code: 'RUNTIME' };
}

/**
 * CPU a run's process may have used before its clock started (a pre-started sandbox's stub, the
 * wrapper: RLIMIT_CPU counts all of a process's CPU, from before its exec too), with the kernel's
 * accounting steps. Without it, a warm run's real CPU-limit kill on one core read as CRASH at
 * 999 ms of a 1 s limit (found by a review).
 */
const cpuBeforeStartMs = 250;

/** Whether a process of a run that lasted `durationMs` can have used `cpuSecs` (0: no limit). */
function cpuLimitReachable(durationMs: number, cpuSecs: number): boolean {
  return cpuSecs > 0 && (durationMs + cpuBeforeStartMs) * availableParallelism() >= cpuSecs * 1000;
}

/**
 * Signals that end commands under this package's limits. The kernel sends SIGXCPU and SIGXFSZ
 * when an rlimit is reached: they name the limit, not a crash.
 */
const endingSignals: readonly {
  signal: NodeJS.Signals;
  code: SandboxFailureCode;
  limit?: string;
}[] = [
  { signal: 'SIGXCPU', code: 'TIMEOUT', limit: 'CPU time limit' },
  { signal: 'SIGXFSZ', code: 'LIMIT_EXCEEDED', limit: 'file size limit' },
  { signal: 'SIGKILL', code: 'CRASH' },
  { signal: 'SIGSEGV', code: 'CRASH' },
  { signal: 'SIGBUS', code: 'CRASH' },
  { signal: 'SIGABRT', code: 'CRASH' },
  { signal: 'SIGSYS', code: 'CRASH' },
];

/**
 * bubblewrap reports "signal n ended the command" as exit code 128 + n. Only the signals above
 * are read back from it: other codes above 128 are as likely to be the program's own choice.
 */
function signalInExitCode(exitCode: number | null, base: ResultBase): string | null {
  const bwrap = base.confinement === 'bubblewrap' || base.confinement === 'bubblewrap-as-caller';
  if (!bwrap || base.platform !== 'linux' || exitCode === null) return null;
  const found = endingSignals.find((entry) => 128 + constants.signals[entry.signal] === exitCode);
  return found?.signal ?? null;
}
