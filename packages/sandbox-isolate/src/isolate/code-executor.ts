// Runs one execution in a prepared isolate under the dual timeout: V8's own timeout (synchronous
// loops, and everything the run awaits) and an external wall-clock timer that disposes the
// isolate (a promise that never settles, a data request that never answers).
import {
  type JsonObject,
  SandboxCancelledError,
  SandboxErrorCode,
  type SandboxErrorJSON,
  toSandboxErrorJSON,
} from '@coda/sandbox-core';
import { answerTooBigForHeap, bridgeLimitError } from '../bridge/limit-errors.ts';
import { capText, maxJsonDepth, scrubHostPaths } from '../bridge/safe-json.ts';
import { answerFits } from './answer-room.ts';
import { disposeQuietly, type PreparedIsolate, runEnded } from './context-builder.ts';
import { ExecutionTimers } from './execution-timers.ts';
import type { ExecutionJob, IsolateStats, JobHost, JobOutcome, SynchronousStart } from './job.ts';
import {
  type CodeLocation,
  syntaxError,
  syntaxErrorAt,
  syntaxProbeSource,
  userFileName,
  userStack,
} from './user-code-location.ts';

/** Arguments are the code, the limits' JSON and a flag; `run` returns nothing (it throws). */
const runOptions = { arguments: { copy: true } } as const;

/**
 * Runs user code in a {@link PreparedIsolate}. The result is serialised to JSON inside the
 * isolate, under the timeout, so getters, `toJSON` and proxies on it cannot run unbounded; the
 * same holds for `dataProxy.request` params, console arguments and status data, and nothing else
 * of user code ever leaves: after `run` starts user code, no isolated-vm task enters the isolate
 * again (each would end by copying an unhandled rejection's reason outside the timeout, see
 * bootstrap-source.ts), so the outcome is waited for rather than asked for.
 */
export class CodeExecutor {
  /**
   * Runs `job` in `prepared` and reports bridge calls to `host`. Never rejects. When `signal`
   * aborts, the isolate is disposed and the outcome is an error built from `signal.reason`
   * (a `SandboxError` keeps its code; anything else becomes `CANCELLED`).
   *
   * With `start`, if `start.allowed()` as user code starts, it starts on the calling thread
   * (isolated-vm's applySync) and runs until it first waits on the host or finishes, under V8's
   * timeout; only the rest runs on the isolate's own thread. That saves two thread hand-offs per
   * execution, but the calling thread can do nothing else meanwhile (neither the wall-clock timer
   * nor `signal` can act before V8's timeout), so only a thread with nothing else to serve may
   * ask for it.
   *
   * `spentMs` is time the job's own input already took of its `timeoutMs` (stripping its
   * TypeScript): user code's clock starts that much before now.
   */
  async run(
    prepared: PreparedIsolate,
    job: ExecutionJob,
    host: JobHost,
    signal?: AbortSignal,
    start?: SynchronousStart,
    spentMs = 0,
  ): Promise<JobOutcome> {
    const { limits } = job;
    const started = performance.now() - spentMs;
    host.started?.();
    // The isolate's CPU counter includes building its context and the warm-up: count from here.
    const cpuBefore = readCpuMs(prepared);
    let ended: SandboxErrorJSON | undefined;
    let cpuAtEnd = 0;
    const timers = new ExecutionTimers(limits.timeoutMs, limits.maxTimers, started);
    prepared.timers = timers;
    // Settles when the run may be over: an outcome delivered, the isolate gone (isolated-vm
    // disposes it at its memory limit), or an end decided here.
    let wake = () => {};
    const over = new Promise<void>((resolve) => {
      wake = resolve;
    });
    prepared.onSettled = wake;
    const end = (error: SandboxErrorJSON) => {
      if (ended !== undefined) return;
      ended = error;
      timers.close();
      // Only the CPU counter: it needs no lock, and this must not block the caller's thread.
      cpuAtEnd = readCpuMs(prepared);
      disposeQuietly(prepared.isolate);
      wake();
    };
    // A passed bridge limit is final: the execution ends here, inside the isolate's call, and
    // the isolate is disposed before user code can catch, ignore or outlive it.
    prepared.onBreach = (limit, size, label) => end(bridgeLimitError(limit, limits, size, label));
    // A big answer is copied in only when the room the isolate reports takes it; otherwise the
    // execution ends with OOM, inside the isolate's call, before anything is copied.
    prepared.admitAnswer = (json, room) => {
      if (ended !== undefined) return false;
      if (answerFits(json, room)) return true;
      end(answerTooBigForHeap(limits.memoryMb, json.length));
      return false;
    };
    prepared.host = {
      status(source, level, message, dataJson) {
        if (ended === undefined) host.status(source, level, message, dataJson);
      },
      async data(paramsJson, units, refusal, tool) {
        // Once user code delivered its outcome the execution is decided: a call a promise chain
        // or a timer makes after that starts nothing on the host (in-process, handlers started
        // for it; found by the issue 23 attack review).
        if (ended !== undefined || prepared.delivered !== undefined) {
          return { ok: false, message: 'Execution has ended' };
        }
        const answer = await host.data(paramsJson, units, refusal, tool);
        if (!answer.ok && answer.fatal !== undefined) end(answer.fatal);
        return ended === undefined ? answer : { ok: false, message: 'Execution has ended' };
      },
      idle(requests, answers) {
        if (ended === undefined && prepared.delivered === undefined) host.idle?.(requests, answers);
      },
    };
    const left = Math.max(0, limits.timeoutMs - spentMs);
    const timer = setTimeout(() => end(timeoutError(limits.timeoutMs)), left);
    const onAbort = () =>
      end(toSandboxErrorJSON(signal?.reason ?? new SandboxCancelledError(), 'CANCELLED'));
    if (signal?.aborted) onAbort();
    else signal?.addEventListener('abort', onAbort, { once: true });

    let failure: unknown;
    let text: string | undefined;
    try {
      const here = ended === undefined && start?.allowed() === true;
      if (!here) start?.yielded();
      if (ended === undefined) {
        const args = [job.code, JSON.stringify(limits), here, job.reportIdle === true] as const;
        // isolated-vm takes whole milliseconds only.
        const timeout = Math.max(1, Math.round(limits.timeoutMs - spentMs));
        const options = { ...runOptions, timeout };
        try {
          if (here) {
            try {
              prepared.run.applySync(undefined, [...args], options);
            } finally {
              // The wall-clock timer cannot fire while user code holds this thread, and nothing
              // else ran on it meanwhile: code that held it up to the limit ends with TIMEOUT.
              if (performance.now() - started >= limits.timeoutMs)
                end(timeoutError(limits.timeoutMs));
            }
          } else {
            await prepared.run.apply(undefined, [...args], options);
          }
        } catch (error) {
          // runEnded is how every run ends (see bootstrap-source.ts); anything else is
          // isolated-vm's own: V8's timeout, a dispose, the memory limit.
          if (error !== runEnded) throw error;
        }
        if (prepared.delivered === undefined && ended === undefined) {
          if (here) start?.yielded();
          // The rest runs on the isolate's thread, bounded by the wall-clock timer (V8's
          // timeout covers only a call's synchronous part). isolated-vm tells of an isolate it
          // disposed only through a call in flight, and none is: its state is polled.
          const poll = setInterval(() => {
            if (prepared.isolate.isDisposed) wake();
          }, disposalPollMs);
          try {
            await over;
          } finally {
            clearInterval(poll);
          }
        }
        if (prepared.delivered === undefined && ended === undefined) failure = isolateGone;
      }
    } catch (error) {
      failure = error;
      // V8 stopped code still running at the limit: TIMEOUT, whatever it delivered before (the
      // wall-clock timer, when it fires first, says the same).
      if (isV8Timeout(error, performance.now() - started, limits.timeoutMs)) {
        end(timeoutError(limits.timeoutMs));
      }
    } finally {
      text = prepared.delivered;
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      prepared.host = undefined;
      prepared.onBreach = undefined;
      prepared.onSettled = undefined;
      prepared.admitAnswer = undefined;
      // No timer outlives its execution, whichever way it ended.
      timers.close();
      prepared.timers = undefined;
    }
    const outcome = text === undefined ? undefined : splitOutcome(text);
    const stats = measure(prepared, started, cpuBefore, outcome);
    if (ended !== undefined) {
      stats.cpuMs = Math.max(stats.cpuMs, cpuAtEnd - cpuBefore);
      return { kind: 'error', error: ended, stats };
    }
    if (outcome?.kind === 'syntax') {
      return locateSyntaxError(prepared, outcome.body, job, stats);
    }
    if (outcome !== undefined) return decode(outcome, job, stats);
    return { kind: 'error', error: mapFailure(failure, job, prepared), stats };
  }
}

/** The failure of a run whose isolate isolated-vm disposed while user code waited on the host. */
const isolateGone = new Error('The isolate was disposed while user code waited on the host');

/**
 * How often a run waiting on the host checks whether isolated-vm disposed its isolate (at the
 * memory limit): the delay of an `OOM` noticed there.
 */
const disposalPollMs = 20;

/** An outcome text's parts (see bootstrap-source.ts). */
interface Outcome {
  kind: string;
  dropped: number;
  heapUsedBytes: number;
  body: string;
}

function splitOutcome(text: string): Outcome {
  const first = text.indexOf('\n');
  const second = text.indexOf('\n', first + 1);
  const third = text.indexOf('\n', second + 1);
  const count = (from: number, to: number) => {
    const value = Number(text.slice(from, to));
    return Number.isSafeInteger(value) && value > 0 ? value : 0;
  };
  return {
    kind: text.slice(0, first),
    dropped: count(first + 1, second),
    heapUsedBytes: count(second + 1, third),
    body: text.slice(third + 1),
  };
}

/**
 * The error of code that did not compile, with its position: V8's AsyncFunction constructor gives
 * none, so the code is compiled once more, as a script that wraps it the same way, only to read
 * where it fails (never run). The constructor already parsed the body on its own, so nothing in it
 * can close the wrapper early. No user code ran in this isolate (it did not compile), so this task
 * of isolated-vm's has no user value to copy at its end.
 */
async function locateSyntaxError(
  prepared: PreparedIsolate,
  body: string,
  job: ExecutionJob,
  stats: IsolateStats,
): Promise<JobOutcome> {
  const thrown = parseThrown(body);
  let found: { message: string; location: CodeLocation } | undefined;
  try {
    if (!prepared.isolate.isDisposed) {
      const probe = await prepared.isolate.compileScript(syntaxProbeSource(job.code), {
        filename: userFileName,
        lineOffset: -1,
      });
      probe.release();
    }
  } catch (error) {
    if (error instanceof Error) found = syntaxErrorAt(error.message, job.code);
  }
  return {
    kind: 'error',
    error: syntaxError(found?.message ?? thrown.message, found?.location),
    stats,
  };
}

function readCpuMs(prepared: PreparedIsolate): number {
  try {
    return prepared.isolate.isDisposed ? 0 : Number(prepared.isolate.cpuTime) / 1e6;
  } catch {
    return 0;
  }
}

/**
 * The run's figures: wall and CPU time from here (the CPU counter needs no lock), the heap from
 * what the isolate delivered (read there, see bootstrap-source.ts; 0 when it delivered nothing).
 */
function measure(
  prepared: PreparedIsolate,
  started: number,
  cpuBefore: number,
  outcome: Outcome | undefined,
): IsolateStats {
  const wallMs = performance.now() - started;
  const cpuMs = Math.max(0, readCpuMs(prepared) - cpuBefore);
  return {
    wallMs,
    cpuMs,
    heapUsedBytes: outcome?.heapUsedBytes ?? 0,
    statusDropped: outcome?.dropped ?? 0,
  };
}

/** Whether `failure` is V8's own timeout (user code can throw the same message, but not late). */
function isV8Timeout(failure: unknown, elapsedMs: number, timeoutMs: number): boolean {
  return (
    failure instanceof Error &&
    failure.message === 'Script execution timed out.' &&
    elapsedMs >= timeoutMs - 1
  );
}

/** The outcome of an execution past its `timeoutMs`; `during` says where, if not in its code. */
export function timeoutError(timeoutMs: number, during?: string): SandboxErrorJSON {
  return {
    name: 'SandboxTimeoutError',
    code: SandboxErrorCode.TIMEOUT,
    message: `Execution timed out after ${timeoutMs} ms${during === undefined ? '' : ` (${during})`}`,
    details: { timeoutMs },
  };
}

function oomError(memoryMb: number): SandboxErrorJSON {
  return {
    name: 'SandboxOOMError',
    code: SandboxErrorCode.OOM,
    message: `Execution exceeded its memory limit of ${memoryMb} MiB`,
    details: { memoryMb },
  };
}

// Why the run ended without an outcome (V8's timeout is handled where it is caught), from facts
// rather than from the path that noticed: an isolate disposed while the host did not dispose it
// was disposed by isolated-vm at its memory limit, whatever the run's call said, or whether user
// code was waiting on the host then (resumed after a data request, a tool call or in a timer).
// Nothing else can end a run: user code's values never leave through isolated-vm (see
// bootstrap-source.ts), so anything else is isolated-vm failing. Called only when the host did
// not end the execution itself (it disposed nothing).
function mapFailure(
  failure: unknown,
  job: ExecutionJob,
  prepared: PreparedIsolate,
): SandboxErrorJSON {
  if (prepared.isolate.isDisposed) return oomError(job.limits.memoryMb);
  const message = failure instanceof Error ? failure.message : String(failure);
  return {
    name: 'SandboxCrashError',
    code: SandboxErrorCode.CRASH,
    message: `The isolate failed: ${capText(scrubHostPaths(message), 1_000)}`,
  };
}

function runtimeError(thrown: Thrown): SandboxErrorJSON {
  const { stack, location } = userStack(thrown.stack);
  const details: JsonObject = { name: thrown.name, stack };
  if (location !== undefined) details.location = { ...location };
  return {
    name: 'SandboxRuntimeError',
    code: SandboxErrorCode.RUNTIME,
    message: `${thrown.name}: ${thrown.message}`,
    details,
  };
}

interface Thrown {
  name: string;
  message: string;
  stack: string;
}

function decode({ kind, body }: Outcome, job: ExecutionJob, stats: IsolateStats): JobOutcome {
  const { maxResultBytes } = job.limits;
  switch (kind) {
    case 'ok':
      return { kind: 'result', json: body, stats };
    case 'too-big':
      return {
        kind: 'error',
        error: resultTooBig(Number(body), maxResultBytes),
        stats,
      };
    case 'too-deep':
      return { kind: 'error', error: resultTooDeep(), stats };
    case 'unsupported': {
      const { path, what } = parseUnsupported(body);
      return {
        kind: 'error',
        error: {
          name: 'SandboxValidationError',
          code: SandboxErrorCode.VALIDATION,
          message: `${path}: ${what} cannot be returned (the result must be JSON: plain objects, arrays, strings, finite numbers, booleans, null)`,
          details: { field: path, what },
        },
        stats,
      };
    }
    case 'unserializable': {
      const thrown = parseThrown(body);
      return {
        kind: 'error',
        error: {
          name: 'SandboxValidationError',
          code: SandboxErrorCode.VALIDATION,
          message: `The result is not JSON-serializable: ${thrown.message}`,
        },
        stats,
      };
    }
    // The allocator refused a buffer, as the bootstrap checked itself (see bootstrap-source.ts):
    // a thrown message alone, 'Array buffer allocation failed' included, is the code's own error.
    case 'oom':
      return { kind: 'error', error: oomError(job.limits.memoryMb), stats };
    default:
      return { kind: 'error', error: runtimeError(parseThrown(body)), stats };
  }
}

/** The VALIDATION error of a result nested deeper than {@link maxJsonDepth}. */
export function resultTooDeep(): SandboxErrorJSON {
  return {
    name: 'SandboxValidationError',
    code: SandboxErrorCode.VALIDATION,
    message: `The result is nested deeper than ${maxJsonDepth} levels`,
    details: { field: 'result', limit: maxJsonDepth },
  };
}

/** The VALIDATION error of an oversized result. */
export function resultTooBig(size: number, limit: number): SandboxErrorJSON {
  return {
    name: 'SandboxValidationError',
    code: SandboxErrorCode.VALIDATION,
    message: `The result is ${size} bytes or more, over maxResultBytes (${limit})`,
    details: { limit, size, field: 'maxResultBytes' },
  };
}

/** The path and description of a value the isolate refused to encode (text is the isolate's). */
function parseUnsupported(body: string): { path: string; what: string } {
  try {
    const value = JSON.parse(body) as Record<string, unknown>;
    const text = (key: string) =>
      typeof value[key] === 'string' ? capText(scrubHostPaths(value[key]), 1_000) : '';
    return { path: text('path') || 'result', what: text('what') || 'a value' };
  } catch {
    return { path: 'result', what: 'a value' };
  }
}

function parseThrown(body: string): Thrown {
  try {
    const value = JSON.parse(body) as Record<string, unknown>;
    const text = (key: string, max: number) =>
      typeof value[key] === 'string' ? capText(scrubHostPaths(value[key]), max) : '';
    return {
      name: text('name', 200) || 'Error',
      message: text('message', 4_096),
      stack: text('stack', 8_192),
    };
  } catch {
    return { name: 'Error', message: 'unknown error', stack: '' };
  }
}
