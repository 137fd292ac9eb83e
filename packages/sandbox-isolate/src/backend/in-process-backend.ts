// Runs isolates in the host process: fastest, but a catastrophic isolated-vm failure can take
// the host down with it (see docs/isolate.md, "Process model").

import { SandboxErrorCode } from '@coda/sandbox-core';
import { IsolateRuntime, type IsolateRuntimeOptions } from '../isolate/isolate-runtime.ts';
import { type ExecutionJob, idleStats, type JobHost, type JobOutcome } from '../isolate/job.ts';
import { loadWasmModules, type WasmModuleConfig } from '../isolate/wasm-modules.ts';
import type { ExecutionBackend } from './execution-backend.ts';

/** The backend of `isolation: 'in-process'`. */
export class InProcessBackend implements ExecutionBackend {
  readonly #runtime: IsolateRuntime;
  #broken: string | undefined;
  /** Ends an execution in flight; called with the crash when isolated-vm reports one. */
  readonly #inFlight = new Set<(outcome: JobOutcome) => void>();

  constructor(options: IsolateRuntimeOptions, wasmModules: readonly WasmModuleConfig[]) {
    if (!process.execArgv.includes('--no-node-snapshot')) {
      options.logger.warn(
        'in-process isolation without --no-node-snapshot: isolated-vm may crash on Node >= 20',
      );
    }
    // After a catastrophic error isolated-vm's state is unrecoverable: refuse to run more here,
    // and end the executions in flight, whose isolates will never answer (measured: no terminal
    // event within 20 s, and dispose never settled).
    const onCatastrophicError = (message: string) => {
      this.#broken ??= message;
      const started = performance.now();
      for (const finish of [...this.#inFlight]) finish(crashOutcome(message, started));
      options.onCatastrophicError(message);
    };
    this.#runtime = new IsolateRuntime(
      { ...options, onCatastrophicError },
      loadWasmModules(wasmModules),
    );
  }

  ready(): Promise<void> {
    return this.#runtime.manager.warm();
  }

  async execute(job: ExecutionJob, host: JobHost, signal: AbortSignal): Promise<JobOutcome> {
    const started = performance.now();
    if (this.#broken !== undefined) return crashOutcome(this.#broken, started);
    // Not Promise.race against a promise that never settles: each race would leave a reaction
    // on it holding that execution's outcome for the life of the process.
    return new Promise((resolve) => {
      const finish = (outcome: JobOutcome) => {
        if (!this.#inFlight.delete(finish)) return;
        resolve(outcome);
      };
      this.#inFlight.add(finish);
      host.dispatched?.();
      void this.#runtime.execute(job, host, signal).then(finish);
    });
  }

  pids(): number[] {
    return [];
  }

  async dispose(): Promise<void> {
    this.#runtime.manager.dispose();
  }
}

function crashOutcome(message: string, started: number): JobOutcome {
  return {
    kind: 'error',
    error: {
      name: 'SandboxCrashError',
      code: SandboxErrorCode.CRASH,
      message: `isolated-vm reported a catastrophic error in this process (${message}); restart it`,
    },
    stats: idleStats(started),
  };
}
