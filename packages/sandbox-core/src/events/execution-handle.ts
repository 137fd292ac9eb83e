// The handle a runner returns for one execution, and the channel a runner feeds it through.
import type { SandboxEvent, TerminalEvent } from './events.ts';
import { isTerminalEvent } from './events.ts';

/**
 * One running execution. Iterate it (`for await`) for its events: `status` events, then exactly
 * one terminal `result` or `error` event, after which iteration ends. Each iteration starts from
 * the first event, so late or repeated readers miss nothing.
 */
export interface ExecutionHandle extends AsyncIterable<SandboxEvent> {
  /** Identifies the execution in logs, guards and stats. */
  readonly id: string;
  /** The terminal event. Never rejects: every failure is an `error` event. */
  readonly result: Promise<TerminalEvent>;
  /** Ends the execution with a `CANCELLED` error event, unless it already ended. */
  cancel(reason?: string): void;
}

/** The runner's side of an {@link ExecutionHandle}. */
export interface ExecutionChannel {
  /** What the runner hands to its caller. */
  readonly handle: ExecutionHandle;
  /**
   * Delivers `event` to readers. Once a terminal event was pushed the channel is closed and
   * later pushes are ignored (returns false), so an execution can never end twice.
   */
  push(event: SandboxEvent): boolean;
  /** Whether a terminal event was pushed. */
  readonly closed: boolean;
}

/**
 * Creates the handle for one execution. `onCancel` runs at most once, on the first
 * `cancel()` before the execution ended; the runner answers it by pushing its terminal event.
 */
export function createExecutionChannel(
  id: string,
  onCancel: (reason: string) => void,
): ExecutionChannel {
  const events: SandboxEvent[] = [];
  let wakeReaders: (() => void)[] = [];
  let terminal: TerminalEvent | undefined;
  let cancelRequested = false;
  let resolveResult!: (event: TerminalEvent) => void;
  const result = new Promise<TerminalEvent>((resolve) => {
    resolveResult = resolve;
  });

  async function* read(): AsyncGenerator<SandboxEvent, void, undefined> {
    let index = 0;
    while (true) {
      while (index < events.length) {
        const event = events[index++]!;
        yield event;
        if (isTerminalEvent(event)) return;
      }
      await new Promise<void>((resolve) => wakeReaders.push(resolve));
    }
  }

  const handle: ExecutionHandle = {
    id,
    result,
    cancel(reason = 'Execution cancelled') {
      if (terminal !== undefined || cancelRequested) return;
      cancelRequested = true;
      onCancel(reason);
    },
    [Symbol.asyncIterator]: () => read(),
  };

  return {
    handle,
    get closed() {
      return terminal !== undefined;
    },
    push(event) {
      if (terminal !== undefined) return false;
      events.push(event);
      if (isTerminalEvent(event)) {
        terminal = event;
        resolveResult(event);
      }
      const readers = wakeReaders;
      wakeReaders = [];
      for (const wake of readers) wake();
      return true;
    },
  };
}
