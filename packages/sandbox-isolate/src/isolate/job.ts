// What one execution hands to the isolate side and gets back. Plain JSON, so the same shapes
// cross the worker-process boundary unchanged.
import type { ExecutionLimits, SandboxErrorJSON, StatusLevel } from '@coda/sandbox-core';
import type { CodeLanguage } from './typescript-input.ts';

/** One execution as the isolate side sees it. */
export interface ExecutionJob {
  /** The execution's id (`context.executionId`). */
  id: string;
  /** The user code: the body of an async function. */
  code: string;
  /** Every limit of the execution, defaults applied. */
  limits: ExecutionLimits;
  /** `typescript`: `code` is stripped of its types where the isolate runs. Default `javascript`. */
  language?: CodeLanguage;
  /**
   * The isolate tells {@link JobHost.idle} when the run waits for nothing but answers: for a
   * second run checked against its journal (replay-journal.ts). Default false.
   */
  reportIdle?: boolean;
}

/** Figures measured on the isolate side of one execution. */
export interface IsolateStats {
  /** Wall-clock time of the run in the isolate, in milliseconds. */
  wallMs: number;
  /** CPU time the isolate used, in milliseconds. */
  cpuMs: number;
  /** Heap in use when the run ended, in bytes. */
  heapUsedBytes: number;
  /** Status events the isolate dropped before they crossed (count cap, byte cap). */
  statusDropped: number;
}

/** Stats of a job that ended without an isolate reporting any, `started` at performance.now(). */
export function idleStats(started: number): IsolateStats {
  return { wallMs: performance.now() - started, cpuMs: 0, heapUsedBytes: 0, statusDropped: 0 };
}

/** How one execution ended, as the isolate side reports it. */
export type JobOutcome =
  | {
      /** User code returned. */
      kind: 'result';
      /** What it returned, as JSON text. */
      json: string;
      /** What the run used. */
      stats: IsolateStats;
    }
  | {
      /** The run ended without a result. */
      kind: 'error';
      /** Why, in the wire form of a `SandboxError`. */
      error: SandboxErrorJSON;
      /** What the run used. */
      stats: IsolateStats;
    };

/** The answer to a `dataProxy.request`: the response JSON, or a message to throw in the isolate. */
export type DataAnswer =
  | {
      /** The handler answered. */
      ok: true;
      /** Its answer, as JSON text. */
      json: string;
    }
  | {
      /** The request failed. */
      ok: false;
      /** The message the request rejects with in user code. */
      message: string;
      /** Ends the execution with this error. */
      fatal?: SandboxErrorJSON;
    };

/** Why a data request's params did not cross: '' when they did. */
export type ParamsRefusal = '' | 'depth' | 'size' | 'values';

/** What the isolate side calls on the host while an execution runs. */
export interface JobHost {
  /** A status event that passed the isolate's caps; the host applies its own. */
  status(source: string, level: StatusLevel, message: string, dataJson: string | undefined): void;
  /**
   * A data request. `paramsJson` is null when the isolate (or the worker) refused to let it
   * cross: `refusal` says why (`depth`: nested deeper than `maxJsonDepth`; `size`: over
   * `maxRequestBytes`, at least `units` long; `values`: over `maxRequestValues`). `tool` names
   * the tool of a `tools.NAME(input)` call (undefined for `dataProxy.request`); a tool call made
   * without input has `paramsJson` ''.
   */
  data(
    paramsJson: string | null,
    units: number,
    refusal: ParamsRefusal,
    tool?: string,
  ): Promise<DataAnswer>;
  /**
   * The job left the host's queue: it goes to an isolate now (in `process` mode, a worker took
   * it). Called once, before anything else of the job; the end of its queue wait in telemetry.
   */
  dispatched?(): void;
  /**
   * User code's time starts now: the isolate is built (and TypeScript stripped) and the executor
   * starts the clock of `timeoutMs`. Called once, after {@link dispatched}; a watchdog of the
   * job's time counts from here, so that preparation never shortens it.
   */
  started?(): void;
  /**
   * The run does nothing more until an answer reaches it: no code of its runs and no timer is
   * pending, having made `requests` data requests and tool calls and received `answers`
   * answers (compare them with what was asked and answered: a report whose answers fall short
   * was overtaken by an answer on its way). Only for a job with `reportIdle`; may come again.
   */
  idle?(requests: number, answers: number): void;
}

/**
 * Asks for user code to start on the calling thread (see {@link CodeExecutor.run}): for a thread
 * that serves nothing else meanwhile, such as a worker process's main thread with one execution.
 */
export interface SynchronousStart {
  /** Checked as user code starts: whether the calling thread still serves nothing else. */
  allowed(): boolean;
  /**
   * Called once the calling thread is free again while the execution goes on: user code waits on
   * the host, or it did not start here after all. Not called when it finished on this thread.
   */
  yielded(): void;
}
