// Runs one execution to its end, passing each event to `onEvent` as it arrives: the loop every
// caller of an ExecutionHandle writes.
import type { ExecutionHandle, SandboxEvent, TerminalEvent } from '@coda/sandbox-core';

/** How an execution ended, and how many status events it sent on the way. */
export interface ExecutionOutcome {
  terminal: TerminalEvent;
  statusEvents: number;
  /** Milliseconds from the call to the terminal event, measured by the caller. */
  ms: number;
}

/** Reads `handle` to its terminal event. */
export async function runToEnd(
  handle: ExecutionHandle,
  onEvent: (event: SandboxEvent) => void = () => {},
): Promise<ExecutionOutcome> {
  const started = performance.now();
  let statusEvents = 0;
  for await (const event of handle) {
    if (event.type === 'status') statusEvents++;
    onEvent(event);
  }
  return { terminal: await handle.result, statusEvents, ms: performance.now() - started };
}
