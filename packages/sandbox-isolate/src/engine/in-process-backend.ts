// Runs isolates in the host process: fastest, but a catastrophic isolated-vm failure can take
// the host down with it (see docs/isolate.md, "Process model").

import { IsolateRuntime, type IsolateRuntimeOptions } from '../isolate/isolate-runtime.ts';
import type { ExecutionJob, JobHost, JobOutcome } from '../isolate/job.ts';
import { loadWasmModules, type WasmModuleConfig } from '../isolate/wasm-modules.ts';
import type { ExecutionBackend } from './backend.ts';

/** The backend of `isolation: 'in-process'`. */
export class InProcessBackend implements ExecutionBackend {
  readonly #runtime: IsolateRuntime;

  constructor(options: IsolateRuntimeOptions, wasmModules: readonly WasmModuleConfig[]) {
    if (!process.execArgv.includes('--no-node-snapshot')) {
      options.logger.warn(
        'in-process isolation without --no-node-snapshot: isolated-vm may crash on Node >= 20',
      );
    }
    this.#runtime = new IsolateRuntime(options, loadWasmModules(wasmModules));
  }

  ready(): Promise<void> {
    return this.#runtime.manager.warm();
  }

  execute(job: ExecutionJob, host: JobHost, signal: AbortSignal): Promise<JobOutcome> {
    return this.#runtime.execute(job, host, signal);
  }

  pids(): number[] {
    return [];
  }

  async dispose(): Promise<void> {
    this.#runtime.manager.dispose();
  }
}
