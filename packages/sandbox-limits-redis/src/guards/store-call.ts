// Runs one store operation for a guard with a deadline, cancellation and the guard's fail mode,
// so an outage neither hangs an execution nor silently lifts the limit.
import { type Logger, SandboxCancelledError, SandboxUnavailableError } from '@coda/sandbox-core';
import type { FailMode } from './guard-options.ts';

/** The settings of one guard that decide how its store calls fail. */
export interface StoreCallSettings {
  name: string;
  failMode: FailMode;
  timeoutMs: number;
  logger: Logger;
}

/** The store answered (`ok`), or it failed and the guard fails open (`ok: false`). */
export type StoreOutcome<T> = { ok: true; value: T } | { ok: false };

/**
 * Calls `operation` and settles with its answer, or when `timeoutMs` passes or `signal` aborts.
 * A failure or timeout rejects with `UNAVAILABLE` (fail closed) or resolves `{ ok: false }` after
 * a warning (fail open); an abort rejects with `CANCELLED`. If the operation succeeds after the
 * call gave up, `undo` receives its answer (to give back a lease nobody will release).
 */
export function callStore<T>(
  settings: StoreCallSettings,
  what: string,
  operation: () => Promise<T>,
  signal?: AbortSignal,
  undo?: (value: T) => void,
): Promise<StoreOutcome<T>> {
  if (signal?.aborted) {
    return Promise.reject(
      new SandboxCancelledError(`${settings.name}: cancelled before admission`, {
        details: { guard: settings.name },
      }),
    );
  }
  return new Promise((resolve, reject) => {
    let settled = false;
    const finish = (action: () => void) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      action();
    };
    const fail = (cause: unknown) => {
      const reason = cause instanceof Error ? cause.message : String(cause);
      if (settings.failMode === 'open') {
        settings.logger.warn(
          { guard: settings.name, operation: what, err: reason },
          `${settings.name}: limit store failed, admitting without the limit (failMode open)`,
        );
        resolve({ ok: false });
        return;
      }
      reject(
        new SandboxUnavailableError(`${settings.name}: limit store unavailable (${reason})`, {
          cause,
          details: { guard: settings.name, failMode: settings.failMode },
        }),
      );
    };
    const onAbort = () =>
      finish(() =>
        reject(
          new SandboxCancelledError(`${settings.name}: cancelled while waiting for the store`, {
            details: { guard: settings.name },
          }),
        ),
      );
    const timer = setTimeout(
      () => finish(() => fail(new Error(`no answer within ${settings.timeoutMs} ms`))),
      settings.timeoutMs,
    );
    signal?.addEventListener('abort', onAbort, { once: true });
    new Promise<T>((run) => run(operation())).then(
      (value) => {
        if (settled) undo?.(value);
        else finish(() => resolve({ ok: true, value }));
      },
      (error: unknown) => finish(() => fail(error)),
    );
  });
}
