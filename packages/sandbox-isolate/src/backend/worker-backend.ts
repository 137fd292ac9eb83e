// The supervisor of `isolation: 'process'`: a fixed number of worker processes, jobs sent to
// the least busy one whose main thread is free (held on the host while none is), and a dead
// worker replaced at once (after a short back-off when workers keep dying before they start).
// A job lost with a worker it shared runs again alone on a worker reserved for it, replaying
// from its journal what the host already gave it (see "Co-tenant survival" in docs/isolate.md).
import {
  type ExecutionLimits,
  type Logger,
  SandboxErrorCode,
  type SandboxErrorJSON,
  toSandboxErrorJSON,
} from '@coda/sandbox-core';
import { type ExecutionJob, idleStats, type JobHost, type JobOutcome } from '../isolate/job.ts';
import type { WasmModuleConfig } from '../isolate/wasm-modules.ts';
import { type LostJob, WorkerProcess } from '../worker/worker-process.ts';
import type { ExecutionBackend } from './execution-backend.ts';
import { ReplayJournal } from './replay-journal.ts';

/** Options of a {@link WorkerBackend}. */
export interface WorkerBackendOptions {
  workers: number;
  maxConcurrent: number;
  /** Longest a job waits on the host for a worker before it ends with `CAPACITY`, in ms. */
  maxQueueWaitMs: number;
  poolSize: number;
  poolMemoryMb: number;
  workerBaseMemoryMb: number;
  wasmModules: readonly WasmModuleConfig[];
  /** Names of the configured tools. */
  toolNames?: readonly string[];
  /** The engine's default limits (jobs that use them send none over IPC). */
  defaultLimits: ExecutionLimits;
  logger: Logger;
}

const maxRestartDelayMs = 5_000;

/** A job waiting on the host because every live worker's main thread runs user code. */
interface HeldJob {
  job: ExecutionJob;
  host: JobHost;
  signal: AbortSignal;
  resolve: (outcome: JobOutcome) => void;
  onAbort: () => void;
  /** Ends the job with `CAPACITY` when it has waited `maxQueueWaitMs`. */
  waitBound: NodeJS.Timeout | undefined;
  /** performance.now() when it was held. */
  heldAt: number;
  /**
   * For a job run again alone: whether its first run started on its worker's main thread, where
   * its second run starts too (see `#onLost`).
   */
  here: boolean;
}

/** Runs jobs in supervised worker processes. */
export class WorkerBackend implements ExecutionBackend {
  readonly #options: WorkerBackendOptions;
  readonly #slots: WorkerProcess[] = [];
  readonly #restartDelays: number[] = [];
  readonly #held: HeldJob[] = [];
  /** Jobs lost with a shared worker, waiting for a worker with no other job (oldest first). */
  readonly #solo: HeldJob[] = [];
  /** Workers running a job of `#solo`: they take no other job until it ends. */
  readonly #reserved = new Set<WorkerProcess>();
  /** The worker that takes no new job while `#solo` waits, so that it becomes free for them. */
  #draining: WorkerProcess | undefined;
  #disposed = false;
  #next = 0;

  constructor(options: WorkerBackendOptions) {
    this.#options = options;
    for (let slot = 0; slot < options.workers; slot++) {
      this.#restartDelays[slot] = 0;
      this.#slots[slot] = this.#spawn(slot);
    }
  }

  /** The current worker processes (for tests and diagnostics). */
  get workers(): readonly WorkerProcess[] {
    return this.#slots;
  }

  pids(): number[] {
    return this.#slots.flatMap((worker) =>
      worker.alive && worker.pid !== undefined ? [worker.pid] : [],
    );
  }

  async ready(): Promise<void> {
    await Promise.all(this.#slots.map((worker) => worker.ready()));
  }

  execute(job: ExecutionJob, host: JobHost, signal: AbortSignal): Promise<JobOutcome> {
    // Behind the jobs already held, if any: first come, first served.
    const worker = this.#held.length > 0 ? undefined : this.#pick();
    const journal = new ReplayJournal(host, job.limits);
    if (worker === undefined) return this.#hold(job, journal, signal);
    host.dispatched?.();
    return worker.execute(job, journal, signal, this.#mayStartOnMainThread(worker));
  }

  async dispose(): Promise<void> {
    this.#disposed = true;
    for (const held of [...this.#held.splice(0), ...this.#solo.splice(0)]) {
      unhold(held);
      held.resolve(heldOutcome(held, disposedError));
    }
    for (const worker of this.#slots) worker.kill({ kind: 'dispose' });
    await Promise.all(this.#slots.map((worker) => worker.exited()));
  }

  // The least busy live worker whose main thread is free (a job sent to the others would wait,
  // unseen, behind user code with its deadline running) and that is neither reserved for a job
  // run alone nor draining for one; ties rotate, so an idle worker refilling its pool after one
  // job is not picked again while another has warm isolates. Undefined when every live worker is
  // taken, or none is alive but one that was ready is being replaced (at once); with none alive
  // and none coming soon (workers that fail to start), a dead one answers at once.
  #pick(): WorkerProcess | undefined {
    const count = this.#slots.length;
    let best: number | undefined;
    let taken = false;
    for (let offset = 0; offset < count; offset++) {
      const index = (this.#next + offset) % count;
      const worker = this.#slots[index]!;
      if (!worker.alive) {
        if (worker.isReady) taken = true;
        continue;
      }
      if (!this.#open(worker)) {
        taken = true;
        continue;
      }
      if (best === undefined || score(worker) < score(this.#slots[best]!)) best = index;
    }
    if (best === undefined && taken) return undefined;
    const chosen = best ?? this.#next % count;
    this.#next = (chosen + 1) % count;
    return this.#slots[chosen]!;
  }

  /** Whether `worker` (alive) may take a new job now. */
  #open(worker: WorkerProcess): boolean {
    return !worker.mainThreadTaken && !this.#reserved.has(worker) && worker !== this.#draining;
  }

  // Waits on the host, not in a worker's pipe: its deadline starts when a worker takes it.
  #hold(job: ExecutionJob, host: JobHost, signal: AbortSignal): Promise<JobOutcome> {
    return new Promise<JobOutcome>((resolve) =>
      this.#enqueue(this.#held, job, host, signal, resolve),
    );
  }

  #enqueue(
    queue: HeldJob[],
    job: ExecutionJob,
    host: JobHost,
    signal: AbortSignal,
    resolve: (outcome: JobOutcome) => void,
    here = false,
  ): void {
    const held: HeldJob = {
      job,
      host,
      signal,
      resolve,
      onAbort: () => {},
      waitBound: undefined,
      heldAt: performance.now(),
      here,
    };
    const cancelled = () => heldOutcome(held, toSandboxErrorJSON(signal.reason, 'CANCELLED'));
    // Leaves the queue, if still in it, ending with `outcome`.
    const leave = (outcome: () => JobOutcome) => {
      const index = queue.indexOf(held);
      if (index < 0) return;
      queue.splice(index, 1);
      unhold(held);
      resolve(outcome());
      this.#release();
    };
    held.onAbort = () => leave(cancelled);
    if (signal.aborted) {
      resolve(cancelled());
      return;
    }
    queue.push(held);
    signal.addEventListener('abort', held.onAbort, { once: true });
    const bound = this.#options.maxQueueWaitMs;
    held.waitBound = setTimeout(() => leave(() => heldOutcome(held, queueWaitError(bound))), bound);
    held.waitBound.unref();
  }

  // A job lost with a worker it shared, not known to be the cause, runs again, once, alone on a
  // worker reserved for it: if it was the cause it now kills only itself (and ends with its own
  // error, the worker's death being its own), and if it was not it finishes as if nothing
  // happened, its journal answering what the host had already answered. It gets its full time
  // limit again: the first run's time went to someone else's failure. One whose journal outgrew
  // its bounds ends with the collateral error the worker gave it.
  #onLost(lost: LostJob): void {
    const journal = lost.host;
    if (
      this.#disposed ||
      lost.solo ||
      lost.signal.aborted ||
      !(journal instanceof ReplayJournal) ||
      !journal.replayable
    ) {
      lost.resolve(lost.outcome);
      return;
    }
    this.#options.logger.info(
      { jobId: lost.job.id },
      'sandbox execution lost with a shared worker process; running it again alone',
    );
    // A second run that does what the first did not ends with the journal's error, or with what
    // the host imposes on it first (replay-journal.ts).
    journal.replay();
    this.#enqueue(
      this.#solo,
      lost.job,
      journal,
      lost.signal,
      (outcome) => lost.resolve(journal.settle(outcome)),
      lost.startedHere,
    );
    // After the dead worker has answered every job and been replaced.
    queueMicrotask(() => this.#release());
  }

  // Jobs of `#solo` first, each to a live worker that holds no job (a fresh one still starting
  // will do: the job waits for it, and ends with UNAVAILABLE if it never starts), reserved for it
  // until it ends; while some still wait, one worker drains (takes no new job) so that they get one even
  // under a steady stream of other jobs. Then held jobs, oldest first, to workers whose main
  // thread is free again. Not to a dead worker (its replacement calls this again), nor to one
  // still starting while a taken worker may free sooner (the starting one calls this again once
  // ready).
  #release(): void {
    if (this.#disposed) return;
    while (this.#solo.length > 0) {
      const worker = this.#slots.find(
        (each) =>
          each.alive && each.load === 0 && !each.mainThreadTaken && !this.#reserved.has(each),
      );
      if (worker === undefined) break;
      const held = this.#solo.shift()!;
      unhold(held);
      this.#reserved.add(worker);
      if (this.#draining === worker) this.#draining = undefined;
      const { job, host, signal, resolve, here } = held;
      // Where its first run started: on the worker's main thread a status crosses at once while
      // a request waits for the thread, so the two orders differ, and a second run started the
      // other way diverged from a first run it reproduced exactly. A reserved worker takes no
      // other job, so starting there keeps nobody waiting.
      void worker.execute(job, host, signal, here, true).then((outcome) => {
        this.#reserved.delete(worker);
        resolve(outcome);
        this.#release();
      });
    }
    this.#draining = this.#solo.length > 0 ? this.#drainTarget() : undefined;
    while (this.#held.length > 0) {
      const worker = this.#pick();
      if (worker === undefined || !worker.alive) return;
      if (!worker.isReady && this.#slots.some((each) => each.alive && each.mainThreadTaken)) {
        return;
      }
      const held = this.#held.shift()!;
      unhold(held);
      const { job, host, signal, resolve } = held;
      host.dispatched?.();
      void worker.execute(job, host, signal, this.#mayStartOnMainThread(worker)).then(resolve);
    }
  }

  // The worker to drain for the jobs waiting to run alone: the current one while it can still
  // serve, else the live, unreserved worker with the fewest jobs.
  #drainTarget(): WorkerProcess | undefined {
    const current = this.#draining;
    if (current?.alive && !this.#reserved.has(current)) return current;
    let best: WorkerProcess | undefined;
    for (const worker of this.#slots) {
      if (!worker.alive || this.#reserved.has(worker)) continue;
      if (best === undefined || worker.load < best.load) best = worker;
    }
    return best;
  }

  // User code may start on `chosen`'s main thread (two thread hand-offs fewer) when `chosen` has
  // no other job and another worker's main thread is free for the jobs that arrive meanwhile.
  #mayStartOnMainThread(chosen: WorkerProcess): boolean {
    if (chosen.load > 0 || !chosen.isReady) return false;
    return this.#slots.some(
      (worker) => worker !== chosen && worker.alive && worker.isReady && this.#open(worker),
    );
  }

  #spawn(slot: number): WorkerProcess {
    const options = this.#options;
    const worker = new WorkerProcess({
      init: {
        maxConcurrent: options.maxConcurrent,
        poolSize: options.poolSize,
        poolMemoryMb: options.poolMemoryMb,
        wasmModules: options.wasmModules.map((module) => ({ ...module })),
        toolNames: [...(options.toolNames ?? [])],
        defaultLimits: options.defaultLimits,
      },
      baseMemoryMb: options.workerBaseMemoryMb,
      logger: options.logger,
      onExit: (worker) => this.#replace(slot, worker),
      onMainThreadFree: () => this.#release(),
      onIdle: () => {
        if (this.#solo.length > 0) this.#release();
      },
      onLost: (lost) => this.#onLost(lost),
    });
    void worker.ready().then(() => this.#release());
    return worker;
  }

  #replace(slot: number, dead: WorkerProcess): void {
    if (this.#disposed || this.#slots[slot] !== dead) return;
    // A worker that never got ready is likely to fail again (missing native module, bad WASM
    // path): back off instead of forking in a tight loop. A worker killed by its jobs restarts now.
    const delay = dead.isReady
      ? 0
      : Math.min(maxRestartDelayMs, Math.max(100, (this.#restartDelays[slot] ?? 0) * 2));
    this.#restartDelays[slot] = delay;
    const restart = () => {
      if (this.#disposed || this.#slots[slot] !== dead) return;
      this.#slots[slot] = this.#spawn(slot);
      this.#release();
    };
    if (delay === 0) restart();
    else setTimeout(restart, delay).unref();
  }
}

const disposedError: SandboxErrorJSON = {
  name: 'SandboxCancelledError',
  code: SandboxErrorCode.CANCELLED,
  message: 'SandboxEngine disposed',
};

/** Lower is better: ready workers first, then the least loaded. */
function score(worker: WorkerProcess): number {
  return worker.load + (worker.isReady ? 0 : 1_000);
}

/** Detaches a job leaving the queue from its cancellation and its wait bound. */
function unhold(held: HeldJob): void {
  held.signal.removeEventListener('abort', held.onAbort);
  clearTimeout(held.waitBound);
}

function queueWaitError(maxQueueWaitMs: number): SandboxErrorJSON {
  return {
    name: 'SandboxCapacityError',
    code: SandboxErrorCode.CAPACITY,
    message: `No worker took the execution within maxQueueWaitMs (${maxQueueWaitMs} ms)`,
    details: { limit: 'maxQueueWaitMs', maxQueueWaitMs },
  };
}

/** The outcome of a held job that ended before any worker took it. */
function heldOutcome(held: HeldJob, error: SandboxErrorJSON): JobOutcome {
  return { kind: 'error', error, stats: idleStats(held.heldAt) };
}
