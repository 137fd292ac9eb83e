// The supervisor of `isolation: 'process'`: a fixed number of worker processes, jobs sent to
// the least busy one, and a dead worker replaced at once (after a short back-off when workers
// keep dying before they start).
import type { ExecutionLimits, Logger } from '@coda/sandbox-core';
import type { ExecutionBackend } from '../engine/backend.ts';
import type { ExecutionJob, JobHost, JobOutcome } from '../isolate/job.ts';
import type { WasmModuleConfig } from '../isolate/wasm-modules.ts';
import { WorkerProcess } from './worker-process.ts';

/** Options of a {@link WorkerBackend}. */
export interface WorkerBackendOptions {
  workers: number;
  maxConcurrent: number;
  poolSize: number;
  poolMemoryMb: number;
  workerBaseMemoryMb: number;
  wasmModules: readonly WasmModuleConfig[];
  /** The engine's default limits (jobs that use them send none over IPC). */
  defaultLimits: ExecutionLimits;
  logger: Logger;
}

const maxRestartDelayMs = 5_000;

/** Runs jobs in supervised worker processes. */
export class WorkerBackend implements ExecutionBackend {
  readonly #options: WorkerBackendOptions;
  readonly #slots: WorkerProcess[] = [];
  readonly #restartDelays: number[] = [];
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
    const worker = this.#pick();
    return worker.execute(job, host, signal, this.#mayStartOnMainThread(worker));
  }

  async dispose(): Promise<void> {
    this.#disposed = true;
    for (const worker of this.#slots) worker.kill({ kind: 'dispose' });
    await Promise.all(this.#slots.map((worker) => worker.exited()));
  }

  // The least busy live worker; ties rotate, so an idle worker refilling its pool after one job
  // is not picked again while another has warm isolates.
  #pick(): WorkerProcess {
    const count = this.#slots.length;
    let best: number | undefined;
    for (let offset = 0; offset < count; offset++) {
      const index = (this.#next + offset) % count;
      const worker = this.#slots[index]!;
      if (!worker.alive) continue;
      if (best === undefined || score(worker) < score(this.#slots[best]!)) best = index;
    }
    const chosen = best ?? this.#next % count;
    this.#next = (chosen + 1) % count;
    return this.#slots[chosen]!;
  }

  // User code may start on `chosen`'s main thread (two thread hand-offs fewer) when `chosen` has
  // no other job and another worker's main thread is free for the jobs that arrive meanwhile.
  #mayStartOnMainThread(chosen: WorkerProcess): boolean {
    if (chosen.load > 0 || !chosen.isReady) return false;
    return this.#slots.some(
      (worker) => worker !== chosen && worker.alive && worker.isReady && !worker.mainThreadTaken,
    );
  }

  #spawn(slot: number): WorkerProcess {
    const options = this.#options;
    return new WorkerProcess({
      init: {
        maxConcurrent: options.maxConcurrent,
        poolSize: options.poolSize,
        poolMemoryMb: options.poolMemoryMb,
        wasmModules: options.wasmModules.map((module) => ({ ...module })),
        defaultLimits: options.defaultLimits,
      },
      baseMemoryMb: options.workerBaseMemoryMb,
      logger: options.logger,
      onExit: (worker) => this.#replace(slot, worker),
    });
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
    };
    if (delay === 0) restart();
    else setTimeout(restart, delay).unref();
  }
}

/**
 * Lower is better: prefer ready workers, then those whose main thread is free, then the least
 * loaded. A job sent to a worker whose main thread runs user code waits until that code yields.
 */
function score(worker: WorkerProcess): number {
  return worker.load + (worker.isReady ? 0 : 2_000) + (worker.mainThreadTaken ? 1_000 : 0);
}
