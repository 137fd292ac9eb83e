// What runs jobs wherever isolates live (the host in `in-process` mode, each worker otherwise):
// an IsolateManager for single-use isolates plus a CodeExecutor for the dual timeout.
import { type Logger, SandboxCancelledError, toSandboxErrorJSON } from '@coda/sandbox-core';
import { CodeExecutor, timeoutError } from './code-executor.ts';
import { ContextBuilder } from './context-builder.ts';
import { IsolateManager } from './isolate-manager.ts';
import {
  type ExecutionJob,
  idleStats,
  type JobHost,
  type JobOutcome,
  type SynchronousStart,
} from './job.ts';
import { stripTypes } from './typescript-input.ts';
import type { LoadedWasmModule } from './wasm-modules.ts';

/** Options of an {@link IsolateRuntime}. */
export interface IsolateRuntimeOptions {
  maxConcurrent: number;
  poolSize: number;
  poolMemoryMb: number;
  logger: Logger;
  onCatastrophicError: (message: string) => void;
  /** Names of the configured tools (`tools.NAME` in every context). */
  toolNames?: readonly string[];
  /** Told of slow isolate builds (see `ContextBuilderOptions.onBuild`). */
  onBuild?: ((building: boolean) => void) | undefined;
}

/** An IsolateManager plus a CodeExecutor: what runs jobs wherever isolates live. */
export class IsolateRuntime {
  readonly manager: IsolateManager;
  readonly #executor = new CodeExecutor();

  constructor(options: IsolateRuntimeOptions, wasmModules: readonly LoadedWasmModule[]) {
    this.manager = new IsolateManager({
      contextBuilder: new ContextBuilder({
        wasmModules,
        toolNames: options.toolNames ?? [],
        onCatastrophicError: options.onCatastrophicError,
        onBuild: options.onBuild,
      }),
      maxConcurrent: options.maxConcurrent,
      poolSize: options.poolSize,
      poolMemoryMb: options.poolMemoryMb,
      logger: options.logger,
    });
  }

  /**
   * Runs one job on a fresh single-use isolate. Never rejects. `start` asks for user code to
   * start on the calling thread (see {@link CodeExecutor.run}).
   */
  async execute(
    job: ExecutionJob,
    host: JobHost,
    signal?: AbortSignal,
    start?: SynchronousStart,
  ): Promise<JobOutcome> {
    const started = performance.now();
    // Stripped here, where isolates live: in `process` mode a worker, not the host, spends the
    // time (about 1.3 ms per 10 KB, see docs/performance.md), in a thread of its own. The
    // strip's own time is the input's doing, so it counts against the job's `timeoutMs` (some
    // nestings take seconds per hundred bytes; see type-stripper-thread.ts); starting a thread
    // for it does not.
    const { timeoutMs } = job.limits;
    const stripped =
      job.language === 'typescript'
        ? await stripTypes(job.code, { deadlineMs: timeoutMs, signal })
        : undefined;
    const spentMs = stripped?.stripMs ?? 0;
    if (stripped !== undefined && 'ended' in stripped) {
      const error =
        stripped.ended === 'timeout'
          ? timeoutError(timeoutMs, 'stripping its TypeScript types')
          : toSandboxErrorJSON(signal?.reason ?? new SandboxCancelledError(), 'CANCELLED');
      return { kind: 'error', error, stats: idleStats(started) };
    }
    if (stripped !== undefined && 'error' in stripped) {
      return { kind: 'error', error: stripped.error, stats: idleStats(started) };
    }
    let prepared: Awaited<ReturnType<IsolateManager['acquire']>>;
    try {
      prepared = await this.manager.acquire(job.limits.memoryMb);
    } catch (error) {
      return {
        kind: 'error',
        error: toSandboxErrorJSON(error),
        stats: idleStats(started),
      };
    }
    // User code started on this thread would hold off the timer that disposes released
    // isolates, and with it any code they still run: dispose them first.
    if (start !== undefined) this.manager.disposeReleased();
    try {
      const runnable = stripped === undefined ? job : { ...job, code: stripped.code };
      return await this.#executor.run(prepared, runnable, host, signal, start, spentMs);
    } finally {
      this.manager.release(prepared);
    }
  }
}
