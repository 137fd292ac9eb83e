// What `run`, `exec` and `execSync` return: seed 004's SandboxResult plus how the command ended
// and which controls were enforced.
import type { Platform } from '../platform/platform.ts';
import type { SandboxControl } from './controls.ts';
import type { ProcessExit } from './sandboxed-process.ts';

/** The outcome of one command. A failing command is a result, never a throw. */
export interface SandboxResult {
  /** Exit code 0, not timed out, not cancelled. */
  readonly success: boolean;
  readonly stdout: string;
  readonly stderr: string;
  readonly exitCode: number | null;
  /** Why it did not succeed, in words. */
  readonly error?: string;
  /** Whether OS confinement applied (bubblewrap, Seatbelt, Job Object), not only limits. */
  readonly sandboxApplied: boolean;
  readonly platform: Platform;
  /** Signal that ended the outermost process, if any. */
  readonly signal: string | null;
  readonly timedOut: boolean;
  readonly cancelled: boolean;
  /** The memory cgroup recorded that the limit was hit. */
  readonly memoryExceeded: boolean;
  readonly durationMs: number;
  /** More than `maxOutputBytes` was written to stdout; the rest was dropped. */
  readonly stdoutTruncated: boolean;
  readonly stderrTruncated: boolean;
  /** Controls enforced for this run. */
  readonly controls: readonly SandboxControl[];
}

/** The outcome fields that do not depend on the output. */
export interface ResultBase {
  readonly sandboxApplied: boolean;
  readonly platform: Platform;
  readonly controls: readonly SandboxControl[];
}

/** Builds a result from how the process ended and what it wrote. */
export function toResult(
  base: ResultBase,
  exit: ProcessExit,
  output: { stdout: string; stderr: string; stdoutTruncated: boolean; stderrTruncated: boolean },
  limits: { timeoutMs: number; maxMemoryMb: number },
): SandboxResult {
  const success =
    exit.exitCode === 0 && !exit.timedOut && !exit.cancelled && exit.error === undefined;
  const error = success ? undefined : describeFailure(exit, limits);
  return {
    success,
    ...output,
    exitCode: exit.exitCode,
    ...(error === undefined ? {} : { error }),
    sandboxApplied: base.sandboxApplied,
    platform: base.platform,
    signal: exit.signal,
    timedOut: exit.timedOut,
    cancelled: exit.cancelled,
    memoryExceeded: exit.memoryExceeded,
    durationMs: exit.durationMs,
    controls: base.controls,
  };
}

/** A result for a command that never started (missing program, strict refusal). */
export function notStartedResult(base: ResultBase, error: string): SandboxResult {
  return {
    success: false,
    stdout: '',
    stderr: '',
    exitCode: null,
    error,
    sandboxApplied: base.sandboxApplied,
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

function describeFailure(
  exit: ProcessExit,
  limits: { timeoutMs: number; maxMemoryMb: number },
): string {
  if (exit.error !== undefined) return exit.error;
  if (exit.timedOut) return `Command timed out after ${limits.timeoutMs} ms`;
  if (exit.cancelled) return 'Command was cancelled';
  if (exit.memoryExceeded) return `Command exceeded its memory limit (${limits.maxMemoryMb} MiB)`;
  if (exit.signal !== null) return `Command was killed with ${exit.signal}`;
  return `Command failed with exit code ${exit.exitCode}`;
}
