// Shared helpers of this package's tests: collect a handle's events, and assert a terminal event.
import type {
  ErrorEvent,
  ExecutionHandle,
  Logger,
  ResultEvent,
  SandboxEvent,
  TerminalEvent,
} from '@coda/sandbox-core';
import { expect } from 'vitest';

/** Every event of `handle`, in order. */
export async function collect(handle: ExecutionHandle): Promise<SandboxEvent[]> {
  const events: SandboxEvent[] = [];
  for await (const event of handle) events.push(event);
  return events;
}

/** Asserts `event` is a result and returns it. */
export function expectResult(event: TerminalEvent): ResultEvent {
  if (event.type !== 'result') {
    throw new Error(`expected a result, got ${event.code}: ${event.message}`);
  }
  return event;
}

/** Asserts `event` is an error with `code` and returns it. */
export function expectError(event: TerminalEvent, code: string): ErrorEvent {
  expect(event.type, JSON.stringify(event).slice(0, 500)).toBe('error');
  const error = event as ErrorEvent;
  expect(error.code, error.message).toBe(code);
  return error;
}

/** Asserts the engine still serves a fresh execution correctly. */
export async function expectHealthy(engine: {
  run(request: { code: string }): Promise<TerminalEvent>;
}): Promise<void> {
  const event = await engine.run({ code: 'return globalThis.leftover ?? "fresh"' });
  expect(expectResult(event).payload).toBe('fresh');
}

/**
 * A logger that records each worker process death that ended executions (the supervisor's
 * warning). "The worker was kept" is `deaths` staying empty: comparing worker pids would also
 * count a worker replaced while idle because earlier executions made it big (worker-recycle
 * test), which ends nothing.
 */
export function workerDeathLog(): { logger: Logger; deaths: unknown[] } {
  const deaths: unknown[] = [];
  const ignore = () => {};
  const logger: Logger = {
    debug: ignore,
    info: ignore,
    warn: (object: unknown, message?: string) => {
      if (message === 'sandbox worker process ended') deaths.push(object);
    },
    error: ignore,
  };
  return { logger, deaths };
}

/**
 * Runs an execution that leaves memory resident in its worker after it returns 40 000: 640 MiB
 * of 16 KiB buffers within its own 1 024 MiB, half of them dropped (malloc keeps the pages after
 * the isolate is gone).
 */
export function runLeavingMemory(engine: {
  run(request: {
    code: string;
    limits: { memoryMb: number; timeoutMs: number };
  }): Promise<TerminalEvent>;
}): Promise<TerminalEvent> {
  return engine.run({
    code: `const keep = [];
      for (let i = 0; i < 40000; i++) keep.push(new ArrayBuffer(16 * 1024));
      for (let i = 0; i < keep.length; i += 2) keep[i] = null;
      return keep.length`,
    limits: { memoryMb: 1_024, timeoutMs: 20_000 },
  });
}

/** Whether `deaths` (see {@link workerDeathLog}) holds a memory-bound kill of a worker holding one job. */
export function killedAloneByMemory(deaths: readonly unknown[]): boolean {
  return deaths.some((death) => {
    const { reason, jobs } = death as { reason?: string; jobs?: number };
    return reason === 'memory' && jobs === 1;
  });
}
