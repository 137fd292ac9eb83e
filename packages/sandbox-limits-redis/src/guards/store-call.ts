// Runs one store operation for a guard with a deadline, cancellation and the guard's fail mode,
// so an outage neither hangs an execution nor silently lifts the limit.
import { SandboxCancelledError, SandboxUnavailableError } from '@coda/sandbox-core';
import type { FailMode } from './guard-options.ts';
import type { Warn } from './warnings.ts';

/** The settings of one guard that decide how its store calls fail. */
export interface StoreCallSettings {
  name: string;
  failMode: FailMode;
  timeoutMs: number;
}

/** The store answered (`ok`), or it failed and the guard fails open (`ok: false`). */
export type StoreOutcome<T> = { ok: true; value: T } | { ok: false };

/** Calls a store operation under a guard's settings; see {@link createStoreCaller}. */
export type StoreCaller = <T>(
  what: string,
  operation: () => Promise<T>,
  signal?: AbortSignal,
  undo?: (value: T) => void,
) => Promise<StoreOutcome<T>>;

interface Pending {
  deadline: number;
  expire(): void;
}

/**
 * Makes the function a guard calls its store through. Each call settles with the store's answer,
 * or when `timeoutMs` passes or `signal` aborts. A failure or timeout rejects with `UNAVAILABLE`
 * (fail closed) or resolves `{ ok: false }` after a warning (fail open); an abort rejects with
 * `CANCELLED`. If the operation succeeds after the call gave up, `undo` receives its answer (to
 * give back a lease nobody will release).
 *
 * Deadlines are watched by one interval per guard that runs only while calls are pending, rather
 * than a timer per call: a timer costs about as much as the rest of an admission. A timeout
 * therefore fires between `timeoutMs` and `timeoutMs` + a tenth of it (at least 5 ms) late.
 */
export function createStoreCaller(settings: StoreCallSettings, warn: Warn): StoreCaller {
  const pending = new Set<Pending>();
  const everyMs = Math.max(5, Math.ceil(settings.timeoutMs / 10));
  let watcher: ReturnType<typeof setInterval> | undefined;

  const watch = () => {
    const now = performance.now();
    for (const call of pending) if (call.deadline <= now) call.expire();
    if (pending.size === 0) {
      clearInterval(watcher);
      watcher = undefined;
    }
  };

  const failure = (what: string, cause: unknown) => {
    const reason = cause instanceof Error ? cause.message : String(cause);
    if (settings.failMode === 'open') {
      warn(
        `fail-open:${what}`,
        { operation: what, failMode: 'open', err: reason },
        `${settings.name}: limit store failed (${what}); failMode open, going on without this limit`,
      );
      return undefined;
    }
    return new SandboxUnavailableError(`${settings.name}: limit store unavailable (${reason})`, {
      cause,
      details: { guard: settings.name, failMode: settings.failMode },
    });
  };

  const cancelled = (when: string) =>
    new SandboxCancelledError(`${settings.name}: cancelled ${when}`, {
      details: { guard: settings.name },
    });

  return <T>(
    what: string,
    operation: () => Promise<T>,
    signal?: AbortSignal,
    undo?: (value: T) => void,
  ): Promise<StoreOutcome<T>> => {
    if (signal?.aborted) return Promise.reject(cancelled('before admission'));
    return new Promise((resolve, reject) => {
      let settled = false;
      const finish = () => {
        settled = true;
        pending.delete(call);
        signal?.removeEventListener('abort', onAbort);
      };
      const fail = (cause: unknown) => {
        finish();
        const error = failure(what, cause);
        if (error === undefined) resolve({ ok: false });
        else reject(error);
      };
      const onAbort = () => {
        finish();
        reject(cancelled('while waiting for the store'));
      };
      const call: Pending = {
        deadline: performance.now() + settings.timeoutMs,
        expire: () => fail(new Error(`no answer within ${settings.timeoutMs} ms`)),
      };
      pending.add(call);
      watcher ??= setInterval(watch, everyMs);
      signal?.addEventListener('abort', onAbort, { once: true });
      let answer: Promise<T>;
      try {
        answer = operation();
      } catch (error) {
        answer = Promise.reject(error);
      }
      answer.then(
        (value) => {
          if (settled) {
            undo?.(value);
            return;
          }
          finish();
          resolve({ ok: true, value });
        },
        (error: unknown) => {
          if (!settled) fail(error);
        },
      );
    });
  };
}
