// Reading an execution the way an API host would: every event, or only its terminal event, with
// assertions that narrow it and print the whole event when it is not the expected one.
import type {
  ErrorEvent,
  ExecutionHandle,
  ResultEvent,
  SandboxErrorCode,
  SandboxEvent,
  TerminalEvent,
} from '@coda/sandbox-core';
import type { SandboxEngine } from '@coda/sandbox-isolate';
import { expect } from 'vitest';

/** Every event of `handle`, in order; the last one is the terminal event. */
export async function eventsOf(handle: ExecutionHandle): Promise<SandboxEvent[]> {
  const events: SandboxEvent[] = [];
  for await (const event of handle) events.push(event);
  return events;
}

/** The status events among `events`. */
export function statusesOf(events: readonly SandboxEvent[]) {
  return events.filter((event) => event.type === 'status');
}

function describe(event: unknown): string {
  return JSON.stringify(event)?.slice(0, 600) ?? String(event);
}

/** Asserts that `event` is a result and returns it. */
export function asResult(event: SandboxEvent | undefined): ResultEvent {
  expect(event?.type, describe(event)).toBe('result');
  return event as ResultEvent;
}

/** Asserts that `event` is an error event with `code` and returns it. */
export function asError(event: SandboxEvent | undefined, code: SandboxErrorCode): ErrorEvent {
  expect(event?.type, describe(event)).toBe('error');
  expect((event as ErrorEvent).code, describe(event)).toBe(code);
  return event as ErrorEvent;
}

/** Runs `code` and returns its result payload, failing on an error event. */
export async function payloadOf(engine: SandboxEngine, code: string): Promise<unknown> {
  return asResult(await engine.run({ code })).payload;
}

/** Asserts that `engine` still serves a fresh execution, with no state left by earlier ones. */
export async function expectServing(engine: SandboxEngine): Promise<void> {
  const event: TerminalEvent = await engine.run({
    code: 'return [typeof globalThis.leftover, 6 * 7]',
  });
  expect(asResult(event).payload).toEqual(['undefined', 42]);
}

/**
 * Runs `code` on an engine whose time limit is `timeoutMs`, asserts it ends with TIMEOUT naming
 * that limit (within a bound generous for a loaded machine), and that the engine still serves.
 */
export async function expectTimesOut(
  engine: SandboxEngine,
  code: string,
  timeoutMs: number,
): Promise<void> {
  const started = performance.now();
  const event = asError(await engine.run({ code }), 'TIMEOUT');
  expect(event.details).toEqual({ timeoutMs });
  expect(performance.now() - started).toBeLessThan(timeoutMs + 9_000);
  await expectServing(engine);
}
