// Where executions run: in this process, or in supervised worker processes.
import type { ExecutionJob, JobHost, JobOutcome } from '../isolate/job.ts';

/** Runs jobs on isolates; the engine holds one. */
export interface ExecutionBackend {
  /** Resolves when the backend can run jobs without a cold start. */
  ready(): Promise<void>;
  /** Runs `job`; never rejects. `signal` aborts it (its reason becomes the error). */
  execute(job: ExecutionJob, host: JobHost, signal: AbortSignal): Promise<JobOutcome>;
  /** Process ids of the worker processes running isolates (none in-process). */
  pids(): number[];
  /** Ends every job and frees every isolate and process. */
  dispose(): Promise<void>;
}
