// How a worker process's death is told to the jobs it held, from the facts of the death: why the
// host killed it (if it did), whether it ever started, what its stderr says (isolated-vm's
// catastrophic-error line, V8's fatal banner, heap exhaustion) and whether the job was alone.
import { SandboxErrorCode, type SandboxErrorJSON } from '@coda/sandbox-core';
import { capText, scrubHostPaths } from '../bridge/safe-json.ts';
import { type ExecutionJob, idleStats, type JobOutcome } from '../isolate/job.ts';
import { catastrophicMarker } from './protocol.ts';

/** Why the host killed a worker. */
export type KillReason =
  | { kind: 'deadline'; id: string }
  | { kind: 'memory'; rssMb: number; boundMb: number }
  | { kind: 'abort-unanswered' }
  | { kind: 'out-of-memory' }
  /** Replaced while idle: what past executions left made it too big (it holds no job). */
  | { kind: 'recycle'; rssMb: number; limitMb: number }
  | { kind: 'dispose' };

/** What V8 writes to stderr when a heap is exhausted, before it calls the OOM handler. */
export const v8OutOfMemoryBanner = '<--- Last few GCs --->';

/** The facts of a worker's death that decide a job's error. */
export interface DeathFacts {
  /** Why the host killed it, if it did. */
  reason: KillReason | undefined;
  /** The worker's own report that it could not start. */
  initError: string | undefined;
  /** Whether it started and warmed its pool. */
  isReady: boolean;
  /** It died of memory exhaustion while running exactly this job. */
  outOfMemory: boolean;
}

/** The error of `job`, whose worker died `how`, when the death is its own (not collateral). */
export function deathError(job: ExecutionJob, how: string, facts: DeathFacts): SandboxErrorJSON {
  const { reason } = facts;
  if (facts.initError !== undefined || (!facts.isReady && reason === undefined)) {
    return {
      name: 'SandboxUnavailableError',
      code: SandboxErrorCode.UNAVAILABLE,
      message: `The sandbox worker could not start: ${facts.initError ?? how}`,
    };
  }
  switch (reason?.kind) {
    case 'dispose':
      return {
        name: 'SandboxCancelledError',
        code: SandboxErrorCode.CANCELLED,
        message: 'SandboxEngine disposed',
      };
    case 'memory':
      return {
        name: 'SandboxOOMError',
        code: SandboxErrorCode.OOM,
        message: `The worker process used ${reason.rssMb} MiB, over its bound of ${reason.boundMb} MiB, and was killed`,
        details: { rssMb: reason.rssMb, boundMb: reason.boundMb, memoryMb: job.limits.memoryMb },
      };
    case 'deadline':
      if (reason.id === job.id) {
        return {
          name: 'SandboxTimeoutError',
          code: SandboxErrorCode.TIMEOUT,
          message: `Execution timed out after ${job.limits.timeoutMs} ms (its worker process did not stop it and was killed)`,
          details: { timeoutMs: job.limits.timeoutMs },
        };
      }
      break;
    default:
      break;
  }
  if (facts.outOfMemory) {
    return {
      name: 'SandboxOOMError',
      code: SandboxErrorCode.OOM,
      message: `Execution exhausted memory and its worker process died: ${how}`,
      details: { memoryMb: job.limits.memoryMb },
    };
  }
  return {
    name: 'SandboxCrashError',
    code: SandboxErrorCode.CRASH,
    message: `The execution's worker process died: ${how}`,
  };
}

/**
 * Whether a worker's death is the job's own doing, or at least not known to be someone else's:
 * the worker never started, the engine is disposed, the job was being cancelled, the host killed
 * the worker for that job's time, or the job was alone in the worker (nobody else could have
 * caused it). Otherwise a co-tenant may have caused it. `others` counts the jobs the worker held
 * when the host killed it, even those that answered before it exited. For the memory bound, alone
 * means alone since it started, or since its last co-tenant left if the worker grew since by
 * more than the job's own share of the bound, 3 × memoryMb (`shared` false): what a co-tenant
 * that finished left resident (buffers the process keeps after the isolate is gone) counts in the
 * worker's memory after it left.
 */
export function isOwnDeath(
  death: { reason: KillReason | undefined; started: boolean },
  jobId: string,
  aborted: boolean,
  others: number,
  shared = others > 0,
): boolean {
  const { reason } = death;
  if (!death.started || reason?.kind === 'dispose' || aborted) return true;
  if (reason?.kind === 'deadline') return reason.id === jobId;
  if (reason?.kind === 'memory') return others === 0 && !shared;
  return others === 0;
}

/**
 * The error of a job lost with a worker that other jobs shared, when it cannot run again: what it
 * exchanged with the host outgrew the replay journal's bounds, so a second run could repeat what
 * the caller or a handler saw. Its own code did not cause the death as far as the host can tell;
 * `details.collateral` says so.
 */
export function collateralOutcome(started: number, how: string, others: number): JobOutcome {
  const error: SandboxErrorJSON = {
    name: 'SandboxCrashError',
    code: SandboxErrorCode.CRASH,
    message:
      others === 0
        ? `The execution was lost with its worker process, over its memory bound with what executions that had shared it left resident (${how}); it was not run again`
        : `The execution was lost with its worker process, which ran ${others} other execution${others === 1 ? '' : 's'} too (${how}); it was not run again`,
    details: { collateral: true, coTenants: others },
  };
  return { kind: 'error', error, stats: idleStats(started) };
}

/**
 * Why a worker died, from its stderr: isolated-vm's catastrophic-error line (written by the
 * worker itself) or V8's fatal-error banner, else the exit code or signal.
 */
export function describeDeath(
  stderr: string,
  code: number | null,
  signal: NodeJS.Signals | null,
): { how: string; outOfMemory: boolean } {
  const lines = stderr.split('\n');
  const catastrophic = lines
    .find((line) => line.startsWith(catastrophicMarker))
    ?.slice(catastrophicMarker.length);
  const fatal = lines.find((line) => /^# Fatal (?!error in)/.test(line))?.slice(2);
  const exit = signal ?? `code ${code}`;
  let how = `the worker process exited (${exit})`;
  if (catastrophic !== undefined)
    how = `isolated-vm reported a catastrophic error (${catastrophic})`;
  else if (fatal !== undefined) how = `V8 aborted the worker process (${exit}): ${fatal}`;
  const cause = catastrophic ?? fatal ?? '';
  if (catastrophic === undefined && fatal === undefined && stderr.includes(v8OutOfMemoryBanner)) {
    how = `V8 exhausted an isolate's heap (${exit})`;
  }
  return {
    how: capText(scrubHostPaths(how), 500),
    outOfMemory:
      /out[- ]of[- ]memory|heap limit/i.test(cause) || stderr.includes(v8OutOfMemoryBanner),
  };
}
