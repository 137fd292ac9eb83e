// The executions this server is running, so health can report them and shutdown can end them.
import type { ExecutionHandle } from '@coda/sandbox-core';

/** Running executions of one server. */
export interface ExecutionRegistry {
  /** Executions not yet finished (their response included). */
  readonly size: number;
  /** Tracks `handle` until `finished` settles. */
  track(handle: ExecutionHandle, finished: Promise<unknown>): void;
  /** Cancels every running execution with `reason`; each ends with a `CANCELLED` event. */
  cancelAll(reason: string): void;
  /** Resolves when every tracked execution has finished. */
  drained(): Promise<void>;
}

/** Creates an empty registry. */
export function createExecutionRegistry(): ExecutionRegistry {
  const running = new Map<ExecutionHandle, Promise<unknown>>();
  return {
    get size() {
      return running.size;
    },
    track(handle, finished) {
      const settled = finished.then(
        () => {},
        () => {},
      );
      running.set(handle, settled);
      void settled.then(() => running.delete(handle));
    },
    cancelAll(reason) {
      for (const handle of running.keys()) handle.cancel(reason);
    },
    async drained() {
      await Promise.all(running.values());
    },
  };
}
