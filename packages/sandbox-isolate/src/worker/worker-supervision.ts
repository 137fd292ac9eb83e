// What the host watches of one worker process while it runs jobs, and when it kills it: a job
// past its time limit (the isolate ignored termination), an abort the worker does not confirm,
// resident memory over its bound, and V8's heap-exhaustion report on its stderr. How the death
// is then told to the jobs is worker-death.ts.
import type { ExecutionJob } from '../isolate/job.ts';
import { ResidentMemoryReader } from './process-memory.ts';
import { type KillReason, v8OutOfMemoryBanner } from './worker-death.ts';

/** The supervised facts of one job in the worker. */
export interface SupervisedJob {
  readonly job: ExecutionJob;
  /** performance.now() past which the worker is killed for this job's time. */
  deadline: number;
  /** The earlier deadline while the job runs alone on the worker's main thread. */
  mainThreadDeadline?: number | undefined;
  /** performance.now() past which an unconfirmed abort kills the worker. */
  abortDeadline?: number;
  /**
   * Once the job is left alone in the worker after sharing it: the lowest resident memory seen
   * since (Infinity until the next sample), in MiB. A worker that grew from it by more than the
   * job's own share of the bound was grown by the job; less, a co-tenant left what crossed it.
   */
  aloneRssMb?: number | undefined;
  /**
   * Whether its user code already ran on its isolate's own thread when the worker announced its
   * current build: such a job is not blocked by it, so its deadlines are neither held nor moved.
   */
  runsThroughBuild?: boolean | undefined;
}

/** The worker as its supervision sees it. */
export interface SupervisedWorker {
  readonly pid: number | undefined;
  /** The jobs it holds now. */
  jobs(): Iterable<SupervisedJob>;
  /** Whether it said it is building an isolate (its main thread blocked), within `maxBuildMs`. */
  building(): boolean;
  /** Its resident memory as it reported it itself (for hosts without /proc), in bytes. */
  reportedRss(): number;
  kill(reason: KillReason): void;
}

/**
 * How long past its time limit (counted from when the host sent it) a job may run before the
 * host kills its worker without a word from it: the backstop behind the worker's own `overdue`
 * report (`overdueAfterMs` past the limit, protocol.ts), for a worker that cannot report.
 */
export const deadlineGraceMs = 2_000;
/**
 * The same for a job alone on the worker's main thread: that thread is stuck (code V8's timeout
 * does not reach) and cannot report, and no co-tenant shares the worker.
 */
export const mainThreadDeadlineGraceMs = 250;
/** How long a worker may take to confirm an abort before it is killed. */
export const abortGraceMs = 2_000;
/** The same for a job alone in its worker and running on the worker's main thread. */
export const mainThreadAbortGraceMs = 250;
const sampleEveryMs = 50;
const stderrKeepChars = 4_096;

/** Watches one worker process: its jobs' deadlines, its memory and its stderr. */
export class WorkerSupervision {
  readonly #worker: SupervisedWorker;
  readonly #baseMemoryMb: number;
  #sampler: NodeJS.Timeout | undefined;
  #stderr = '';
  readonly #memory: ResidentMemoryReader;
  /** Resident memory when the worker became ready, in MiB. */
  #readyRssMb: number | undefined;

  constructor(worker: SupervisedWorker, baseMemoryMb: number) {
    this.#worker = worker;
    this.#baseMemoryMb = baseMemoryMb;
    this.#memory = new ResidentMemoryReader(worker.pid);
  }

  /** The end of the worker's stderr, kept to tell why it died. */
  get stderr(): string {
    return this.#stderr;
  }

  /**
   * Takes a chunk of the worker's stderr. V8 ran out of heap: the worker either reports it and
   * kills itself, or, when the isolate ran on its main thread, waits forever for that thread to
   * report it. Either way it is done.
   */
  stderrChunk(chunk: string): void {
    this.#stderr = (this.#stderr + chunk).slice(-stderrKeepChars);
    if (this.#stderr.includes(v8OutOfMemoryBanner)) this.#worker.kill({ kind: 'out-of-memory' });
  }

  /** Notes the worker's resident memory as it starts serving: what later growth is measured from. */
  markReady(): void {
    this.#readyRssMb = this.#rssMb();
  }

  /**
   * Whether the worker, now idle, kept more than half its base allowance above its resident
   * memory when ready: what past executions left behind (heaps V8 or malloc kept, pages not
   * returned) would otherwise count against the next execution's bound, which then ends `OOM`
   * for memory it did not use. Such a worker is replaced while it holds no job (Jest's
   * `workerIdleMemoryLimit` does the same for its workers). Reads /proc once (~20 µs).
   */
  overgrownWhenIdle(): { rssMb: number; limitMb: number } | undefined {
    if (this.#readyRssMb === undefined) return undefined;
    const limitMb = this.#readyRssMb + Math.floor(this.#baseMemoryMb / 2);
    const rssMb = this.#rssMb();
    return rssMb > limitMb ? { rssMb, limitMb } : undefined;
  }

  /** Samples every 50 ms while the worker holds jobs (the deadlines need no timer per job). */
  start(): void {
    if (this.#sampler !== undefined) return;
    this.#sampler = setInterval(() => this.#sample(), sampleEveryMs);
    this.#sampler.unref();
  }

  stop(): void {
    clearInterval(this.#sampler);
    this.#sampler = undefined;
  }

  /** The worker exited: nothing more to read. */
  end(): void {
    this.stop();
    this.#memory.close();
  }

  #sample(): void {
    const worker = this.#worker;
    const now = performance.now();
    let count = 0;
    let boundMb = this.#baseMemoryMb;
    let only: SupervisedJob | undefined;
    // While it builds, it can neither start a job, report nor confirm an abort: the deadlines of
    // the jobs it blocks move when it is done.
    const building = worker.building();
    for (const pending of worker.jobs()) {
      count++;
      only = pending;
      const held = building && pending.runsThroughBuild !== true;
      const late = now > pending.deadline || now > (pending.mainThreadDeadline ?? Infinity);
      if (late && !held) {
        worker.kill({ kind: 'deadline', id: pending.job.id });
        return;
      }
      if (pending.abortDeadline !== undefined && now > pending.abortDeadline && !held) {
        worker.kill({ kind: 'abort-unanswered' });
        return;
      }
      boundMb += 3 * pending.job.limits.memoryMb;
    }
    if (count === 0) {
      this.stop();
      return;
    }
    const rssMb = this.#rssMb();
    if (count === 1 && only?.aloneRssMb !== undefined) {
      only.aloneRssMb = Math.min(only.aloneRssMb, rssMb);
    }
    if (rssMb > boundMb) worker.kill({ kind: 'memory', rssMb, boundMb });
  }

  #rssMb(): number {
    const worker = this.#worker;
    return Math.round((this.#memory.read() ?? worker.reportedRss()) / 1_048_576);
  }
}
