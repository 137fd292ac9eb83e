// The host side of one worker process: starts it (worker-spawn.ts) and relays jobs and bridge
// calls. What the host watches while it runs (deadlines, memory, stderr) is
// worker-supervision.ts; how its death is told to the jobs it held, worker-death.ts.
import type { ChildProcess } from 'node:child_process';
import { type Logger, toSandboxErrorJSON } from '@coda/sandbox-core';
import { type ExecutionJob, idleStats, type JobHost, type JobOutcome } from '../isolate/job.ts';
import {
  type HostMessage,
  maxBuildMs,
  paramsRefusal,
  type WorkerInit,
  type WorkerMessage,
} from './protocol.ts';
import {
  collateralOutcome,
  deathError,
  describeDeath,
  isOwnDeath,
  type KillReason,
} from './worker-death.ts';
import { forkWorker } from './worker-spawn.ts';
import {
  abortGraceMs,
  deadlineGraceMs,
  mainThreadAbortGraceMs,
  mainThreadDeadlineGraceMs,
  type SupervisedJob,
  WorkerSupervision,
} from './worker-supervision.ts';

/** Options of a {@link WorkerProcess}. */
export interface WorkerProcessOptions {
  init: WorkerInit;
  /** Resident memory allowed beyond 3 × memoryMb of each running job, in MiB. */
  baseMemoryMb: number;
  logger: Logger;
  /** Called once, after the process exited and every job it held was answered. */
  onExit: (worker: WorkerProcess) => void;
  /** Called when the worker's main thread no longer runs user code (see `mainThreadTaken`). */
  onMainThreadFree: () => void;
  /** Called when the worker holds no job any more (a job finished, or the worker died). */
  onIdle?: () => void;
  /**
   * Called for each job lost with the worker when the death is not known to be that job's own
   * (see {@link LostJob}): the callee answers it, with `lost.outcome` or by running it again.
   */
  onLost: (lost: LostJob) => void;
}

/** A job that was in a worker when the worker died, not known to be the cause. */
export interface LostJob {
  job: ExecutionJob;
  host: JobHost;
  signal: AbortSignal;
  resolve: (outcome: JobOutcome) => void;
  /** The error the job ends with if it is not run again (a collateral `CRASH`). */
  outcome: JobOutcome;
  /** Whether the job was run alone on a worker reserved for it (a second run already). */
  solo: boolean;
  /** Whether its user code was sent to start on the worker's main thread (see `execute`). */
  startedHere: boolean;
}

interface PendingJob extends SupervisedJob {
  host: JobHost;
  resolve: (outcome: JobOutcome) => void;
  signal: AbortSignal;
  onAbort: (() => void) | undefined;
  /** Whether user code may start on the worker's main thread. */
  here: boolean;
  /** Whether it was sent to start there. */
  startedHere: boolean;
  /** Whether the job went to the worker. */
  sent: boolean;
  /** Whether the job was sent alone to a worker reserved for it (a second run after a death). */
  solo: boolean;
  /** Whether another job was in the worker with it at some point (see `isOwnDeath`). */
  shared: boolean;
  started: number;
  /** performance.now() when the job was sent to the worker. */
  sentAt?: number;
  /** How far its deadlines moved for the worker's announced builds, in ms (≤ `maxBuildMs`). */
  buildShiftMs: number;
}

const abortListenerOptions = { once: true } as const;

/** One supervised worker process hosting isolates. */
export class WorkerProcess {
  readonly #options: WorkerProcessOptions;
  readonly #child: ChildProcess;
  readonly #jobs = new Map<string, PendingJob>();
  readonly #ready: Promise<boolean>;
  readonly #exited: Promise<void>;
  readonly #supervision: WorkerSupervision;
  #isReady = false;
  #alive = true;
  #killReason: KillReason | undefined;
  /** The jobs the worker held when the host decided to kill it (see `#onExit`). */
  #heldAtKill: readonly string[] = [];
  #reportedRss = 0;
  /** performance.now() when the worker said it started building an isolate, until `built`. */
  #buildingSince: number | undefined;
  /** The job that may be running on the worker's main thread (sent with `here`, not yielded). */
  #onMainThread: string | undefined;
  #initError: string | undefined;
  /** The worker died of memory exhaustion while running exactly one job: that job's fault. */
  #outOfMemory = false;

  constructor(options: WorkerProcessOptions) {
    this.#options = options;
    this.#child = forkWorker();
    const jobs = this.#jobs;
    this.#supervision = new WorkerSupervision(
      {
        pid: this.#child.pid,
        jobs: () => jobs.values(),
        reportedRss: () => this.#reportedRss,
        building: () =>
          this.#buildingSince !== undefined && performance.now() - this.#buildingSince < maxBuildMs,
        kill: (reason) => this.kill(reason),
      },
      options.baseMemoryMb,
    );
    this.#child.stderr?.setEncoding('utf8');
    this.#child.stderr?.on('data', (chunk: string) => this.#supervision.stderrChunk(chunk));
    let markReady: (ready: boolean) => void = () => {};
    this.#ready = new Promise((resolve) => {
      markReady = resolve;
    });
    this.#child.on('message', (message: WorkerMessage) => {
      if (message.t === 'ready') {
        this.#isReady = true;
        this.#supervision.markReady();
        markReady(true);
      } else if (message.t === 'init-failed') {
        this.#initError = message.message;
        markReady(false);
        this.kill({ kind: 'dispose' });
      } else this.#onMessage(message);
    });
    this.#exited = new Promise((resolve) => {
      // 'close' comes after 'exit' and after stderr drained, so the crash reason is complete.
      this.#child.once('close', (code, signal) => {
        markReady(false);
        this.#onExit(code, signal);
        resolve();
      });
    });
    this.#child.once('error', (error) => {
      options.logger.error({ err: error }, 'sandbox worker process error');
    });
    this.#send({ t: 'init', init: options.init });
    this.#updateRef();
  }

  /** Operating-system process id. */
  get pid(): number | undefined {
    return this.#child.pid;
  }

  /** Jobs running in this worker. */
  get load(): number {
    return this.#jobs.size;
  }

  /** Whether the process still runs and accepts jobs. */
  get alive(): boolean {
    return this.#alive && this.#killReason === undefined;
  }

  /**
   * Whether a job may be running on the worker's main thread: the worker reads no message until
   * that job yields, so other jobs should go elsewhere.
   */
  get mainThreadTaken(): boolean {
    return this.#onMainThread !== undefined;
  }

  /** Whether the worker started and has its pool warm. */
  get isReady(): boolean {
    return this.#isReady;
  }

  /** Resolves true once the worker is ready, false if it died first. */
  ready(): Promise<boolean> {
    return this.#ready;
  }

  /** Resolves when the process has exited. */
  exited(): Promise<void> {
    return this.#exited;
  }

  /**
   * Runs `job` in this worker. Never rejects: a dying worker answers with an error outcome. With
   * `here`, user code starts on the worker's main thread: ask only when this worker has no other
   * job and another worker can take the jobs that arrive before it yields (the backend holds them
   * when none can).
   */
  execute(
    job: ExecutionJob,
    host: JobHost,
    signal: AbortSignal,
    here = false,
    solo = false,
  ): Promise<JobOutcome> {
    return new Promise<JobOutcome>((resolve) => {
      const pending: PendingJob = {
        job,
        host,
        resolve,
        signal,
        onAbort: undefined,
        here,
        startedHere: false,
        sent: false,
        solo,
        shared: false,
        deadline: Number.POSITIVE_INFINITY,
        started: performance.now(),
        buildShiftMs: 0,
      };
      this.#jobs.set(job.id, pending);
      if (this.#jobs.size > 1) for (const each of this.#jobs.values()) each.shared = true;
      this.#updateRef();
      if (!this.alive) {
        this.#finish(job.id, this.#deathOutcome(pending, 'the worker process is not running'));
        return;
      }
      const onAbort = () => this.#abort(pending);
      pending.onAbort = onAbort;
      signal.addEventListener('abort', onAbort, abortListenerOptions);
      // Once the worker is up, a job goes out at once: no promise reaction on the common path.
      if (this.#isReady) this.#dispatch(pending);
      else {
        void this.#ready.then((ready) => {
          if (ready && this.#jobs.get(job.id) === pending) this.#dispatch(pending);
          // Not ready: #onExit answers the job.
        });
      }
    });
  }

  #dispatch(pending: PendingJob): void {
    const { job } = pending;
    // Checked by the sampler (every 50 ms while jobs run) rather than a timer per job.
    pending.sentAt = performance.now();
    pending.deadline = pending.sentAt + job.limits.timeoutMs + deadlineGraceMs;
    // Small messages: the defaults stay on both sides, a job carries only what differs.
    const message: HostMessage = { t: 'run', id: job.id, code: job.code };
    if (job.limits !== this.#options.init.defaultLimits) message.limits = job.limits;
    if (job.language === 'typescript') message.language = 'typescript';
    if (pending.solo) message.reportIdle = true;
    if (pending.here && this.#jobs.size === 1) {
      message.here = true;
      pending.startedHere = true;
      this.#onMainThread = job.id;
      pending.mainThreadDeadline =
        performance.now() + job.limits.timeoutMs + mainThreadDeadlineGraceMs;
    }
    this.#send(message);
    pending.sent = true;
    if (pending.signal.aborted) this.#abort(pending);
    this.#supervision.start();
  }

  #abort(pending: PendingJob): void {
    if (this.#jobs.get(pending.job.id) !== pending) return;
    const error = toSandboxErrorJSON(pending.signal.reason, 'CANCELLED');
    if (!pending.sent) {
      // Still waiting for the worker to start: nothing runs yet, so answer here.
      this.#finish(pending.job.id, { kind: 'error', error, stats: idleStats(pending.started) });
      return;
    }
    this.#send({ t: 'abort', id: pending.job.id, error });
    // The worker confirms with its `done`; a worker that does not is killed. Code running on the
    // worker's main thread keeps it from reading the abort until the code yields or times out:
    // when that job is all the worker holds, replacing the worker soon is the cheaper way out
    // (a worker still preparing the job reads the abort between two steps, well within it).
    const alone = this.#onMainThread === pending.job.id && this.#jobs.size === 1;
    pending.abortDeadline = performance.now() + (alone ? mainThreadAbortGraceMs : abortGraceMs);
  }

  /** Kills the process (SIGKILL); its jobs end according to `reason`. */
  kill(reason: KillReason = { kind: 'dispose' }): void {
    if (!this.#alive) return;
    if (this.#killReason === undefined) {
      this.#killReason = reason;
      this.#heldAtKill = [...this.#jobs.keys()];
      // The facts of the death are those of now: no sample of a dying process (a job's lowest
      // memory while alone would read as the zombie's) nor a second kill reason.
      this.#supervision.stop();
    }
    // Keep the host alive until the exit is seen, so every job gets its answer: the process
    // and its IPC channel both, since 'close' (which settles exited()) also waits for the
    // channel's end, and an idle worker's channel is unref'd (#updateRef).
    this.#child.ref();
    (this.#child.channel as { ref(): void } | null | undefined)?.ref();
    this.#child.kill('SIGKILL');
  }

  #send(message: HostMessage): void {
    if (!this.#child.connected) return;
    try {
      this.#child.send(message);
    } catch (error) {
      this.#options.logger.warn({ err: error }, 'could not message a sandbox worker');
    }
  }

  #onMessage(message: WorkerMessage): void {
    switch (message.t) {
      case 'status': {
        const pending = this.#jobs.get(message.id);
        if (pending === undefined) return;
        pending.host.status(message.source, message.level, message.message, message.dataJson);
        return;
      }
      case 'data': {
        const pending = this.#jobs.get(message.id);
        if (pending === undefined) return;
        void pending.host
          .data(
            typeof message.paramsJson === 'string' ? message.paramsJson : null,
            typeof message.units === 'number' ? message.units : 0,
            paramsRefusal(message.refusal),
            typeof message.tool === 'string' ? message.tool : undefined,
          )
          .catch(() => ({ ok: false as const, message: 'Data request failed' }))
          .then((answer) =>
            this.#send({ t: 'data-answer', id: message.id, seq: message.seq, answer }),
          );
        return;
      }
      case 'idle': {
        // Only a second run asks for it; its journal compares the counts with its own.
        const pending = this.#jobs.get(message.id);
        const { requests, answers } = message;
        if (
          pending?.solo === true &&
          Number.isSafeInteger(requests) &&
          Number.isSafeInteger(answers)
        ) {
          pending.host.idle?.(requests, answers);
        }
        return;
      }
      case 'done':
        this.#finish(message.id, message.outcome);
        return;
      case 'yielded':
        if (this.#onMainThread === message.id) this.#freeMainThread();
        return;
      case 'overdue':
        // Its isolate ignored termination: the worker is replaced now, and its co-tenants run
        // again. (A `done` sent before this message was read first: the job is gone then.)
        if (this.#jobs.has(message.id)) this.kill({ kind: 'deadline', id: message.id });
        return;
      case 'rss':
        this.#reportedRss = message.rss;
        return;
      case 'building': {
        this.#buildingSince ??= performance.now();
        const running = new Set(Array.isArray(message.running) ? message.running : []);
        for (const pending of this.#jobs.values()) {
          pending.runsThroughBuild = running.has(pending.job.id);
        }
        return;
      }
      case 'built':
        this.#moveDeadlinesPastBuild();
        return;
    }
  }

  /**
   * The worker's main thread was blocked building an isolate (its own job's, when no warm one
   * fit, or the pool's next): neither a job sent meanwhile nor one waiting for its build could
   * start, report or confirm an abort. Each job's deadlines move by the part of the block after
   * it was sent, as the host saw it (a worker is not trusted to say how long), and by no more
   * than `maxBuildMs` over all builds. A job whose user code already ran (on its isolate's own
   * thread, which the build does not block) does not move: the host's backstop is what stops it
   * if it ignores termination, since its `overdue` report waits on the blocked thread (found by an
   * attack review: moved, code V8 cannot interrupt ran 10 s past a 500 ms limit behind a chain of
   * builds that other requests' `memoryMb` forced; test/deadline-after-preparation.test.ts).
   */
  #moveDeadlinesPastBuild(): void {
    const since = this.#buildingSince;
    this.#buildingSince = undefined;
    if (since === undefined) return;
    const now = performance.now();
    for (const pending of this.#jobs.values()) {
      if (pending.sentAt === undefined || pending.runsThroughBuild === true) continue;
      const blockedMs = Math.min(
        now - Math.max(since, pending.sentAt),
        maxBuildMs - pending.buildShiftMs,
      );
      if (!(blockedMs > 0)) continue;
      pending.buildShiftMs += blockedMs;
      pending.deadline += blockedMs;
      if (pending.mainThreadDeadline !== undefined) pending.mainThreadDeadline += blockedMs;
      if (pending.abortDeadline !== undefined) pending.abortDeadline += blockedMs;
    }
  }

  #finish(id: string, outcome: JobOutcome, lost?: (pending: PendingJob) => void): void {
    const pending = this.#jobs.get(id);
    if (pending === undefined) return;
    this.#jobs.delete(id);
    // Left alone after sharing: the sampler notes how low the worker's memory goes from now on.
    if (this.alive && this.#jobs.size === 1) {
      for (const left of this.#jobs.values()) left.aloneRssMb = Number.POSITIVE_INFINITY;
    }
    if (this.#onMainThread === id) this.#freeMainThread();
    if (pending.onAbort !== undefined) {
      pending.signal.removeEventListener('abort', pending.onAbort);
    }
    this.#updateRef();
    // Decided before the outcome is delivered, so nothing picks this worker for a new job first.
    const overgrown = this.#jobs.size === 0 ? this.#supervision.overgrownWhenIdle() : undefined;
    if (overgrown !== undefined) {
      this.#options.logger.info(
        overgrown,
        'sandbox worker process replaced while idle: memory grew',
      );
      this.kill({ kind: 'recycle', ...overgrown });
    }
    if (lost === undefined) pending.resolve(outcome);
    else lost(pending);
    if (this.#jobs.size === 0) this.#options.onIdle?.();
  }

  #freeMainThread(): void {
    const pending =
      this.#onMainThread === undefined ? undefined : this.#jobs.get(this.#onMainThread);
    if (pending !== undefined) pending.mainThreadDeadline = undefined;
    this.#onMainThread = undefined;
    this.#options.onMainThreadFree();
  }

  #onExit(code: number | null, signal: NodeJS.Signals | null): void {
    this.#alive = false;
    this.#supervision.end();
    const stderr = this.#supervision.stderr;
    const { how, outOfMemory } = describeDeath(stderr, code, signal);
    this.#outOfMemory = outOfMemory && this.#jobs.size === 1;
    const quiet = this.#killReason?.kind === 'dispose' || this.#killReason?.kind === 'recycle';
    if (!quiet || this.#jobs.size > 0) {
      this.#options.logger.warn(
        {
          pid: this.#child.pid,
          code,
          signal,
          reason: this.#killReason?.kind,
          jobs: this.#jobs.size,
          stderr: stderr.slice(-1_000),
        },
        'sandbox worker process ended',
      );
    }
    const held = [...this.#jobs.values()];
    const { onLost } = this.#options;
    const facts = {
      reason: this.#killReason,
      started: this.#isReady && this.#initError === undefined,
    };
    // A job whose `done` was read between the kill and the exit (the host's loop was busy, the
    // worker answered meanwhile) was still in the worker when the host killed it for its time,
    // an unanswered abort or their memory: the jobs left are not alone in that death. (V8's heap
    // report is the exception: the job that ran out of heap never answers, so one that did is
    // not its cause.)
    const gone =
      this.#killReason?.kind === 'out-of-memory'
        ? 0
        : this.#heldAtKill.filter((id) => !this.#jobs.has(id)).length;
    for (const pending of held) {
      const others = held.length - 1 + gone;
      // Killed by the memory bound after it was left alone, the worker having grown since by
      // more than the job's own share of the bound (3 × memoryMb): it crossed the bound itself,
      // whoever shared the worker before. Growing less, it crossed on what a co-tenant left.
      const reason = this.#killReason;
      const crossedAlone =
        reason?.kind === 'memory' &&
        pending.aloneRssMb !== undefined &&
        reason.rssMb - pending.aloneRssMb > 3 * pending.job.limits.memoryMb;
      const shared = pending.shared && !crossedAlone;
      const own = isOwnDeath(facts, pending.job.id, pending.signal.aborted, others, shared);
      if (own) {
        this.#finish(pending.job.id, this.#deathOutcome(pending, how));
        continue;
      }
      // Not its own death: others were in the worker at the kill, or (a memory-bound kill with
      // nobody else left) co-tenants that had finished left the memory that crossed the bound.
      // Handed to the backend, which runs it again or answers it with this collateral error.
      const outcome = collateralOutcome(pending.started, how, others);
      this.#finish(pending.job.id, outcome, (each) =>
        onLost({
          job: each.job,
          host: each.host,
          signal: each.signal,
          resolve: each.resolve,
          outcome,
          solo: each.solo,
          startedHere: each.startedHere,
        }),
      );
    }
    this.#options.onExit(this);
  }

  #deathOutcome(pending: PendingJob, how: string): JobOutcome {
    // A job whose abort was sent ends with the abort's reason, as when the worker reads it in
    // time: a kill for an abort left unanswered (code holding the worker's main thread) is how
    // it ended, not why.
    if (pending.sent && pending.signal.aborted) {
      const error = toSandboxErrorJSON(pending.signal.reason, 'CANCELLED');
      return { kind: 'error', error, stats: idleStats(pending.started) };
    }
    const error = deathError(pending.job, how, {
      reason: this.#killReason,
      initError: this.#initError,
      isReady: this.#isReady,
      outOfMemory: this.#outOfMemory,
    });
    return { kind: 'error', error, stats: idleStats(pending.started) };
  }

  // An idle worker must not keep the host's event loop alive; a busy one must.
  #updateRef(): void {
    const channel = this.#child.channel as { ref(): void; unref(): void } | null | undefined;
    if (this.#jobs.size > 0) {
      this.#child.ref();
      channel?.ref();
    } else {
      this.#child.unref();
      channel?.unref();
    }
  }
}
