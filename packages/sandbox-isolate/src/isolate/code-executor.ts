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
import { bridgeLimitError } from '../bridge/limit-errors.ts';
import { capText, maxJsonDepth, scrubHostPaths } from '../bridge/safe-json.ts';
import { disposeQuietly, type PreparedIsolate } from './context-builder.ts';
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

const runOptions = {
  arguments: { copy: true },
  result: { promise: true },
} as const;
const startOptions = { arguments: { copy: true } } as const;
const settledOptions = { result: { promise: true } } as const;

/**
 * Runs user code in a {@link PreparedIsolate}. The result is serialised to JSON inside the
 * isolate, under the timeout, so getters, `toJSON` and proxies on it cannot run unbounded; the
 * same holds for `dataProxy.request` params and console arguments.
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
   */
  async run(
    prepared: PreparedIsolate,
    job: ExecutionJob,
    host: JobHost,
    signal?: AbortSignal,
    start?: SynchronousStart,
  ): Promise<JobOutcome> {
    const { limits } = job;
    const started = performance.now();
    // The isolate's CPU counter includes building its context and the warm-up: count from here.
    const cpuBefore = readCpuMs(prepared);
    let ended: SandboxErrorJSON | undefined;
    let cpuAtEnd = 0;
    // Whether the host disposed the isolate: one the host did not dispose was disposed by
    // isolated-vm itself, which does so only when the heap passed its memoryLimit.
    let disposedByHost = false;
    const timers = new ExecutionTimers(limits.timeoutMs, limits.maxTimers, started);
    prepared.timers = timers;
    const end = (error: SandboxErrorJSON) => {
      if (ended !== undefined) return;
      ended = error;
      timers.close();
      // Only the CPU counter: heap statistics need the isolate's lock, which a running script
      // holds until it stops, and this must not block the caller's thread.
      cpuAtEnd = readCpuMs(prepared);
      disposedByHost = true;
      disposeQuietly(prepared.isolate);
    };
    // A passed bridge limit is final: the execution ends here, inside the isolate's call, and
    // the isolate is disposed before user code can catch, ignore or outlive it.
    prepared.onBreach = (limit, size, label) => end(bridgeLimitError(limit, limits, size, label));
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
    };
    const timer = setTimeout(() => end(timeoutError(limits.timeoutMs)), limits.timeoutMs);
    const onAbort = () =>
      end(toSandboxErrorJSON(signal?.reason ?? new SandboxCancelledError(), 'CANCELLED'));
    if (signal?.aborted) onAbort();
    else signal?.addEventListener('abort', onAbort, { once: true });

    let failure: unknown;
    let settled = false;
    // Whether user code finished within a synchronous start: then nothing of it is left to run
    // (applySync ran its microtasks under V8's timeout) and the isolate's lock is free.
    let finishedHere = false;
    // What user code delivered by the time the call settled: isolated-vm queues the delivery
    // ahead of the settlement, so a rejection reported after user code returned finds it here.
    let text: string | undefined;
    try {
      const here = ended === undefined && start?.allowed() === true;
      if (!here) start?.yielded();
      if (ended === undefined) {
        const args = [job.code, JSON.stringify(limits), here] as const;
        if (here) {
          try {
            prepared.run.applySync(undefined, [...args], {
              ...startOptions,
              timeout: limits.timeoutMs,
            });
          } finally {
            // The wall-clock timer cannot fire while user code holds this thread, and nothing
            // else ran on it meanwhile: code that held it up to the limit ends with TIMEOUT.
            if (performance.now() - started >= limits.timeoutMs)
              end(timeoutError(limits.timeoutMs));
          }
          finishedHere = prepared.delivered !== undefined && ended === undefined;
          if (prepared.delivered === undefined && ended === undefined) {
            start?.yielded();
            // The rest runs on the isolate's thread, bounded by the wall-clock timer (V8's
            // timeout covers only a call's synchronous part); this call just waits for it and
            // reports a rejection nobody handled, as `run.apply` does.
            await prepared.settled.apply(undefined, [], settledOptions);
          }
        } else {
          await prepared.run.apply(undefined, [...args], {
            ...runOptions,
            timeout: limits.timeoutMs,
          });
        }
        settled = true;
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
      // No timer outlives its execution, whichever way it ended.
      timers.close();
      prepared.timers = undefined;
    }
    const stats = await measure(prepared, started, cpuBefore, finishedHere);
    if (ended !== undefined) {
      stats.cpuMs = Math.max(stats.cpuMs, cpuAtEnd - cpuBefore);
      return { kind: 'error', error: ended, stats };
    }
    // User code finished and delivered its outcome: it stands, even when isolated-vm rejected the
    // call afterwards with a promise rejection nobody handled (see docs/isolate.md). A rejection
    // reported while user code still ran ends it; what it delivers later does not count.
    if (text === undefined && settled) {
      // Resolved without a delivery: not expected (see above); one more turn guards a reordering.
      await new Promise((resolve) => setImmediate(resolve));
      text = prepared.delivered;
    }
    if (text?.startsWith('syntax\n') === true) return locateSyntaxError(prepared, text, job, stats);
    if (text !== undefined) return decode(text, job, stats);
    return { kind: 'error', error: mapFailure(failure, job, prepared, disposedByHost), stats };
  }
}

/**
 * The error of code that did not compile, with its position: V8's AsyncFunction constructor gives
 * none, so the code is compiled once more, as a script that wraps it the same way, only to read
 * where it fails (never run). The constructor already parsed the body on its own, so nothing in it
 * can close the wrapper early.
 */
async function locateSyntaxError(
  prepared: PreparedIsolate,
  text: string,
  job: ExecutionJob,
  stats: IsolateStats,
): Promise<JobOutcome> {
  const thrown = parseThrown(text.slice(text.indexOf('\n', text.indexOf('\n') + 1) + 1));
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
 * How long the heap figure may take. It needs the isolate's lock, which code user code left
 * running after it delivered (a promise chain that ends in a loop, resumed in a task V8's timeout
 * does not cover) can hold forever: the synchronous read blocked this thread for good (found by
 * our own attack review; in-process mode, the host's). Such an isolate is disposed right after.
 */
const heapReadMs = 5;

async function measure(
  prepared: PreparedIsolate,
  started: number,
  cpuBefore: number,
  idle: boolean,
): Promise<IsolateStats> {
  const wallMs = performance.now() - started;
  let cpuMs = 0;
  let heapUsedBytes = 0;
  try {
    if (!prepared.isolate.isDisposed) {
      // The CPU counter needs no lock.
      cpuMs = Math.max(0, Number(prepared.isolate.cpuTime) / 1e6 - cpuBefore);
      if (idle) {
        // Finished within a synchronous start: nothing holds the lock, and the read is cheaper
        // than a hand-off to the isolate's thread (about 0.14 ms of a trivial execution).
        heapUsedBytes = prepared.isolate.getHeapStatisticsSync().used_heap_size;
        return { wallMs, cpuMs, heapUsedBytes, statusDropped: 0 };
      }
      let timer: NodeJS.Timeout | undefined;
      heapUsedBytes = await Promise.race([
        prepared.isolate.getHeapStatistics().then((heap) => heap.used_heap_size),
        new Promise<number>((resolve) => {
          timer = setTimeout(() => resolve(0), heapReadMs);
        }),
      ]).finally(() => clearTimeout(timer));
    }
  } catch {
    // Disposed while measuring: the figures stay 0, stats are approximate by contract.
  }
  return { wallMs, cpuMs, heapUsedBytes, statusDropped: 0 };
}

/** Whether `failure` is V8's own timeout (user code can throw the same message, but not late). */
function isV8Timeout(failure: unknown, elapsedMs: number, timeoutMs: number): boolean {
  return (
    failure instanceof Error &&
    failure.message === 'Script execution timed out.' &&
    elapsedMs >= timeoutMs - 1
  );
}

function timeoutError(timeoutMs: number): SandboxErrorJSON {
  return {
    name: 'SandboxTimeoutError',
    code: SandboxErrorCode.TIMEOUT,
    message: `Execution timed out after ${timeoutMs} ms`,
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

// Why the run's promise rejected before user code delivered an outcome (V8's timeout is handled
// where it is caught), from facts rather than from the path that noticed: an isolate disposed
// while the host did not dispose it was disposed by isolated-vm at its memory limit, whatever
// the rejection says ("Promise was abandoned" when user code resumed after a data request, a
// tool call or in a timer). Everything else is the first promise rejection user code left
// unhandled (its message is never trusted to mean isolated-vm).
function mapFailure(
  failure: unknown,
  job: ExecutionJob,
  prepared: PreparedIsolate,
  disposedByHost: boolean,
): SandboxErrorJSON {
  const message = failure instanceof Error ? failure.message : undefined;
  if (prepared.isolate.isDisposed) {
    if (!disposedByHost) return oomError(job.limits.memoryMb);
    return {
      name: 'SandboxCrashError',
      code: SandboxErrorCode.CRASH,
      message: `The isolate failed: ${capText(scrubHostPaths(message ?? String(failure)), 1_000)}`,
    };
  }
  return runtimeError(describeRejection(failure), true);
}

function describeRejection(failure: unknown): Thrown {
  if (failure instanceof Error) {
    return {
      name: capText(typeof failure.name === 'string' ? failure.name : 'Error', 200),
      message: capText(scrubHostPaths(String(failure.message)), 4_096),
      stack: typeof failure.stack === 'string' ? capText(scrubHostPaths(failure.stack), 8_192) : '',
    };
  }
  let text: string;
  try {
    text = typeof failure === 'string' ? failure : (JSON.stringify(failure) ?? String(failure));
  } catch {
    text = '[unprintable]';
  }
  return { name: 'Thrown', message: capText(scrubHostPaths(text), 4_096), stack: '' };
}

function runtimeError(thrown: Thrown, unhandledRejection: boolean): SandboxErrorJSON {
  const { stack, location } = userStack(thrown.stack);
  const details: JsonObject = { name: thrown.name, stack };
  if (location !== undefined) details.location = { ...location };
  if (unhandledRejection) details.unhandledRejection = true;
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

function decode(text: string, job: ExecutionJob, stats: IsolateStats): JobOutcome {
  const first = text.indexOf('\n');
  const second = text.indexOf('\n', first + 1);
  const kind = text.slice(0, first);
  stats.statusDropped = Number(text.slice(first + 1, second)) || 0;
  const body = text.slice(second + 1);
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
    default: {
      const thrown = parseThrown(body);
      if (thrown.message === 'Array buffer allocation failed') {
        return { kind: 'error', error: oomError(job.limits.memoryMb), stats };
      }
      return { kind: 'error', error: runtimeError(thrown, false), stats };
    }
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
