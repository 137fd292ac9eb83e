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

/**
 * Makes the function a guard calls its store through. Each call settles with the store's answer,
 * or when `timeoutMs` passes or `signal` aborts. A failure or timeout rejects with `UNAVAILABLE`
 * (fail closed) or resolves `{ ok: false }` after a warning (fail open); an abort rejects with
 * `CANCELLED`. If the operation succeeds after the call gave up, `undo` receives its answer (to
 * give back a lease nobody will release).
 *
 * Deadlines are watched by one interval per guard that runs only while calls are pending, rather
 * than a timer per call: a timer costs about as much as the rest of an admission. A timeout
 * therefore fires between `timeoutMs` and `timeoutMs` + a tenth of it (at least 5 ms) after the
 * call began (later only if the event loop itself is late).
 */
export function createStoreCaller(settings: StoreCallSettings, warn: Warn): StoreCaller {
  const pending = new Set<PendingCall<never>>();
  // Time is counted in ticks of the watcher, not read per call (a clock read per admission is
  // measurable): a call expires once `ticksToExpire` ticks have passed since it began.
  const everyMs = Math.max(5, Math.ceil(settings.timeoutMs / 10));
  const ticksToExpire = Math.ceil(settings.timeoutMs / everyMs);
  let ticks = 0;
  let watcher: ReturnType<typeof setInterval> | undefined;

  const watch = () => {
    ticks++;
    for (const call of pending) {
      if (ticks >= call.deadline) {
        call.fail(new Error(`no answer within ${settings.timeoutMs} ms`));
      }
    }
    if (pending.size === 0) {
      clearInterval(watcher);
      watcher = undefined;
    }
  };

  const context: CallContext = {
    pending: pending as Set<PendingCall<unknown>>,
    failure(what, cause) {
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
    },
    cancelled: (when) =>
      new SandboxCancelledError(`${settings.name}: cancelled ${when}`, {
        details: { guard: settings.name },
      }),
  };

  return <T>(
    what: string,
    operation: () => Promise<T>,
    signal?: AbortSignal,
    undo?: (value: T) => void,
  ): Promise<StoreOutcome<T>> => {
    if (signal?.aborted) return Promise.reject(context.cancelled('before admission'));
    const { promise, resolve, reject } = Promise.withResolvers<StoreOutcome<T>>();
    // The tick in progress counts as one: expiry comes between `timeoutMs` and one tick later.
    const call = new PendingCall<T>(context, what, ticks + ticksToExpire + 1);
    call.resolve = resolve;
    call.reject = reject;
    call.undo = undo;
    pending.add(call as PendingCall<never>);
    watcher ??= setInterval(watch, everyMs);
    if (signal !== undefined) call.watchSignal(signal);
    let answer: Promise<T>;
    try {
      answer = operation();
    } catch (error) {
      answer = Promise.reject(error);
    }
    answer.then(
      (value) => call.succeed(value),
      (error: unknown) => call.fail(error),
    );
    return promise;
  };
}

/** What every call of one caller shares. */
interface CallContext {
  pending: Set<PendingCall<unknown>>;
  /** The error to reject with, or `undefined` to resolve `{ ok: false }` (fail open). */
  failure(what: string, cause: unknown): Error | undefined;
  cancelled(when: string): Error;
}

/**
 * One store call in flight. A class, so that a call costs one object and two callbacks rather
 * than a closure per outcome: this runs on every admission.
 */
class PendingCall<T> {
  /** The watcher tick at which the call gives up. */
  readonly deadline: number;
  resolve: (outcome: StoreOutcome<T>) => void = () => {};
  reject: (error: unknown) => void = () => {};
  undo: ((value: T) => void) | undefined;
  #settled = false;
  #signal: AbortSignal | undefined;
  readonly #context: CallContext;
  readonly #what: string;

  constructor(context: CallContext, what: string, deadline: number) {
    this.#context = context;
    this.#what = what;
    this.deadline = deadline;
  }

  watchSignal(signal: AbortSignal): void {
    this.#signal = signal;
    signal.addEventListener('abort', this, { once: true });
  }

  /** The signal aborted (`this` is the listener object). */
  handleEvent(): void {
    if (!this.#finish()) return;
    this.reject(this.#context.cancelled('while waiting for the store'));
  }

  succeed(value: T): void {
    if (!this.#finish()) {
      // Answered after the caller stopped waiting: hand the answer to whoever undoes it.
      this.undo?.(value);
      return;
    }
    this.resolve({ ok: true, value });
  }

  fail(cause: unknown): void {
    if (!this.#finish()) return;
    const error = this.#context.failure(this.#what, cause);
    if (error === undefined) this.resolve({ ok: false });
    else this.reject(error);
  }

  /** Marks the call settled; false if it already was. */
  #finish(): boolean {
    if (this.#settled) return false;
    this.#settled = true;
    this.#context.pending.delete(this as PendingCall<unknown>);
    this.#signal?.removeEventListener('abort', this);
    return true;
  }
}
