// Messages between the host and a worker process (JSON over the IPC channel).
import type { ExecutionLimits, SandboxErrorJSON, StatusLevel } from '@coda/sandbox-core';
import type { DataAnswer, JobOutcome, ParamsRefusal } from '../isolate/job.ts';
import type { WasmModuleConfig } from '../isolate/wasm-modules.ts';

/** What a worker needs to start its isolate runtime. */
export interface WorkerInit {
  maxConcurrent: number;
  poolSize: number;
  poolMemoryMb: number;
  wasmModules: WasmModuleConfig[];
  /** Names of the configured tools (`tools.NAME` in every context). */
  toolNames: string[];
  /** The engine's default limits: a job that uses them crosses without its own. */
  defaultLimits: ExecutionLimits;
}

/** Host → worker. */
export type HostMessage =
  | { t: 'init'; init: WorkerInit }
  | {
      t: 'run';
      id: string;
      code: string;
      limits?: ExecutionLimits;
      /** Present when `code` is TypeScript (the worker strips its types). */
      language?: 'typescript';
      /** Start user code on the worker's main thread (the worker has nothing else to do). */
      here?: true;
      /** Report `idle` (a second run, checked against its journal: ExecutionJob.reportIdle). */
      reportIdle?: true;
    }
  | { t: 'abort'; id: string; error: SandboxErrorJSON }
  | { t: 'data-answer'; id: string; seq: number; answer: DataAnswer };

/** Worker → host. */
export type WorkerMessage =
  | { t: 'ready' }
  | { t: 'init-failed'; message: string }
  | {
      t: 'status';
      id: string;
      source: string;
      level: StatusLevel;
      message: string;
      dataJson?: string;
    }
  | {
      t: 'data';
      id: string;
      seq: number;
      paramsJson: string | null;
      units: number;
      refusal: ParamsRefusal;
      /** The tool of a `tools.NAME(input)` call; absent for `dataProxy.request`. */
      tool?: string;
    }
  | { t: 'done'; id: string; outcome: JobOutcome }
  /**
   * The job's isolate waits for nothing but answers, having made `requests` data requests and
   * tool calls and received `answers` answers (JobHost.idle).
   */
  | { t: 'idle'; id: string; requests: number; answers: number }
  /** A job sent with `here` no longer runs on the worker's main thread (it waits on the host). */
  | { t: 'yielded'; id: string }
  /** A job still running {@link overdueAfterMs} past its time limit: its isolate ignores termination. */
  | { t: 'overdue'; id: string }
  | { t: 'rss'; rss: number }
  /**
   * The worker's main thread starts building an isolate (isolated-vm's synchronous calls, every
   * WASM binding's set-up) and can neither take a job nor report until `built`. Sent only while
   * builds are slow (`announceBuildsOverMs`, context-builder.ts). `running`: the jobs whose user
   * code already runs on its isolate's own thread, which the build does not block.
   */
  | { t: 'building'; running: string[] }
  | { t: 'built' };

/**
 * The most time of a job's own the host lets a worker's announced builds take off its deadlines,
 * all builds together: a build still going past it (or a worker announcing builds that never
 * end) is killed at the job's deadline as before.
 */
export const maxBuildMs = 30_000;

/**
 * How long past a job's time limit, counted from when the worker took the job, the worker waits
 * before it tells the host the job is still running (the isolate's own timeout ends it at the
 * limit; one still running is code V8 cannot interrupt). The host then kills the worker at once.
 */
export const overdueAfterMs = 200;

/** Prefix of the stderr line a worker writes before it kills itself on a catastrophic error. */
export const catastrophicMarker = 'coda-sandbox-isolate catastrophic error: ';

/** A worker's refusal code as the host accepts it (anything unknown: treated as over the size). */
export function paramsRefusal(value: unknown): ParamsRefusal {
  return value === '' || value === 'depth' || value === 'size' || value === 'values'
    ? value
    : 'size';
}
