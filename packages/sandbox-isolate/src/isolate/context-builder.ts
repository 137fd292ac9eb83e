// Builds the context user code runs in: an empty V8 context plus dataProxy, reportStatus,
// console, setTimeout and clearTimeout and the configured WASM bindings, installed by the
// bootstrap closure.
import { defaultExecutionLimits } from '@coda/sandbox-core';
import ivm from 'isolated-vm';
import { type BridgeLimit, bridgeLimits } from '../bridge/limit-errors.ts';
import { maxJsonDepth } from '../bridge/safe-json.ts';
import { answerCheckUnits } from './answer-room.ts';
import { bootstrapSource } from './bootstrap-source.ts';
import type { ExecutionTimers } from './execution-timers.ts';
import type { JobHost, ParamsRefusal } from './job.ts';
import type { LoadedWasmModule } from './wasm-modules.ts';

/**
 * Starts user code (see bootstrap-source.ts); only the host holds a Reference to it. It never
 * returns: it throws `runEnded` once user code has started (or failed to compile).
 */
export type IsolateRunFunction = (
  code: string,
  limitsJson: string,
  synchronous: boolean,
  reportsIdle: boolean,
) => never;

/** What the bootstrap's `run` throws when it ends as it should (see bootstrap-source.ts). */
export const runEnded = 'sandbox:run-ended';

/** An isolate with its context built, waiting for one execution. */
export interface PreparedIsolate {
  /** The isolate, used for one execution. */
  readonly isolate: ivm.Isolate;
  /** Its context, with the bootstrap's globals installed. */
  readonly context: ivm.Context;
  /** The isolate's memoryLimit, in MiB. */
  readonly memoryMb: number;
  /** Runs user code once; its outcome arrives in `delivered`. */
  readonly run: ivm.Reference<IsolateRunFunction>;
  /** Receives the bridge calls of the execution this isolate is bound to; unset until then. */
  host: JobHost | undefined;
  /** The timers of the execution this isolate is bound to: `setTimeout` is refused without. */
  timers: ExecutionTimers | undefined;
  /** The run's outcome text (see bootstrap-source.ts), once user code has finished. */
  readonly delivered: string | undefined;
  /** Called when `delivered` is set. */
  onSettled: (() => void) | undefined;
  /**
   * Called, inside the isolate's synchronous call, with a big data answer (see
   * `answerCheckUnits` in answer-room.ts) and the room the isolate's heap has left, in bytes: whether the
   * answer may be copied in. When it may not, it must end the execution and dispose the isolate.
   */
  admitAnswer: ((json: string, room: number) => boolean) | undefined;
  /**
   * Called, inside the isolate's synchronous call, when the bootstrap reports a passed bridge
   * limit (`label` is `dataProxy.request` or `tools.NAME` of a configured tool): it must end the
   * execution and dispose the isolate, so no more user code runs.
   */
  onBreach: ((limit: BridgeLimit, size: number, label: string) => void) | undefined;
}

/** Options of a {@link ContextBuilder}. */
export interface ContextBuilderOptions {
  /** WASM modules to instantiate in every context. */
  wasmModules?: readonly LoadedWasmModule[];
  /** Names of the configured tools: each becomes `tools.NAME` in every context. */
  toolNames?: readonly string[];
  /** Called when isolated-vm reports that V8 lost control of an isolate. */
  onCatastrophicError?: (message: string) => void;
  /**
   * Told before (`true`) and after (`false`) a build that blocks the calling thread, when the
   * last build took longer than `announceBuildsOverMs` or none was made yet (a worker tells its
   * host, whose deadlines must not count the block).
   */
  onBuild?: ((building: boolean) => void) | undefined;
}

/**
 * Builds are announced (`onBuild`) when the last one took longer than this, or none was made yet:
 * a build this short is absorbed by the host's deadline grace, and the common path sends nothing.
 */
export const announceBuildsOverMs = 50;

const warmUpCode = 'return null';
const warmUpLimitsJson = JSON.stringify(defaultExecutionLimits);
const warmUpOptions = {
  arguments: { copy: true },
  timeout: 1_000,
} as const;
/** What the warm-up delivers (see bootstrap-source.ts): `ok`, nothing dropped, a heap, `null`. */
const warmUpOutcome = /^ok\n0\n\d+\nnull$/;
const levels = new Set(['info', 'warn', 'error']);
const sources = new Set(['console', 'reportStatus']);

/**
 * Creates isolates and their contexts. The bridge functions reach the host through a closure in
 * the bootstrap script; the raw isolated-vm handles never become reachable from user code, and the
 * host callbacks never throw into the isolate (a host exception would carry host stack frames).
 */
export class ContextBuilder {
  readonly #wasm: readonly LoadedWasmModule[];
  readonly #toolNames: readonly string[];
  readonly #onCatastrophicError: (message: string) => void;
  readonly #onBuild: ((building: boolean) => void) | undefined;
  /** How long the last build took, in ms (undefined before the first). */
  #lastBuildMs: number | undefined;

  constructor(options: ContextBuilderOptions = {}) {
    this.#wasm = options.wasmModules ?? [];
    this.#toolNames = [...(options.toolNames ?? [])];
    this.#onCatastrophicError = options.onCatastrophicError ?? (() => {});
    this.#onBuild = options.onBuild;
  }

  /**
   * Creates an isolate with `memoryMb` as its memoryLimit and builds its context. With `warm`
   * (for isolates that wait in a pool), it also runs the bootstrap's run path once.
   *
   * Every step runs on the calling thread (isolated-vm's synchronous calls), about 2 ms in one
   * go: each asynchronous step was a hand-off to the isolate's thread and back, and the build
   * cost about 1 ms more CPU that way than in one piece on one thread (docs/performance.md,
   * perf-23). Only the bootstrap and the warm-up run in the isolate here, never user code.
   * While builds are slow (a WASM binding's set-up), each is announced to `onBuild`.
   */
  async prepare(memoryMb: number, warm = true): Promise<PreparedIsolate> {
    const onBuild = this.#onBuild;
    const last = this.#lastBuildMs;
    const announce = onBuild !== undefined && (last === undefined || last > announceBuildsOverMs);
    if (announce) onBuild(true);
    const began = performance.now();
    try {
      return await this.#build(memoryMb, warm);
    } finally {
      this.#lastBuildMs = performance.now() - began;
      if (announce) onBuild(false);
    }
  }

  async #build(memoryMb: number, warm: boolean): Promise<PreparedIsolate> {
    const isolate = new ivm.Isolate({
      memoryLimit: memoryMb,
      onCatastrophicError: this.#onCatastrophicError,
    });
    try {
      const context = isolate.createContextSync();
      const holder: {
        host: JobHost | undefined;
        timers: ExecutionTimers | undefined;
        delivered: string | undefined;
        onSettled: PreparedIsolate['onSettled'];
        onBreach: PreparedIsolate['onBreach'];
        admitAnswer: PreparedIsolate['admitAnswer'];
      } = {
        host: undefined,
        timers: undefined,
        delivered: undefined,
        onSettled: undefined,
        onBreach: undefined,
        admitAnswer: undefined,
      };
      const receive = (text: unknown) => {
        if (typeof text !== 'string' || holder.delivered !== undefined) return;
        holder.delivered = text;
        holder.onSettled?.();
      };
      // Fire and forget: the isolate does not wait for the host thread, and isolated-vm queues
      // this call ahead of the settlement of the run's promise, so it is seen first.
      const deliver = new ivm.Callback(receive, { ignored: true });
      // For a run started with `synchronous` (see bootstrap-source.ts): blocks the isolate until
      // the host has the outcome, so an outcome reached within the call is there when it returns.
      const deliverNow = new ivm.Callback(receive);
      const status = new ivm.Callback(
        (source: unknown, level: unknown, message: unknown, dataJson: unknown) => {
          if (typeof source !== 'string' || !sources.has(source)) return;
          if (typeof level !== 'string' || !levels.has(level)) return;
          if (typeof message !== 'string') return;
          holder.host?.status(
            source,
            level as 'info' | 'warn' | 'error',
            message,
            typeof dataJson === 'string' ? dataJson : undefined,
          );
        },
      );
      // The answer crosses as a string in an array: isolated-vm copies a lone string of 1 KiB or
      // more in as an external string and, when that passes the isolate's memoryLimit, throws a
      // fatal error nothing catches (SIGABRT: the worker and its co-tenants, or in-process the
      // host). An array is copied by V8's serializer into an ordinary heap string, whose
      // allocation ends at the memory limit like any other (OOM). Twenty 1 M answers in flight
      // at once, each fitting on its own, aborted the process (issue 23 attack review).
      const data = new ivm.Reference(
        async (paramsJson: unknown, units: unknown, why: unknown, tool: unknown) => {
          try {
            const host = holder.host;
            if (host === undefined) return crossing('0dataProxy is not available');
            const refusal: ParamsRefusal =
              why === 'depth' || why === 'size' || why === 'values' ? why : '';
            const answer = await host.data(
              refusal === '' && typeof paramsJson === 'string' ? paramsJson : null,
              typeof units === 'number' ? units : 0,
              refusal === '' && typeof paramsJson !== 'string' ? 'size' : refusal,
              typeof tool === 'string' ? tool : undefined,
            );
            if (!answer.ok) return crossing(`0${answer.message}`);
            if (answer.json.length < answerCheckUnits) return crossing(`1${answer.json}`);
            // Copied in only once the isolate says it has room (see bootstrap-source.ts).
            const token = String(nextBigAnswer++);
            bigAnswers.set(token, answer.json);
            return crossing(`2${token}`);
          } catch {
            return crossing('0Data request failed');
          }
        },
      );
      const bigAnswers = new Map<string, string>();
      let nextBigAnswer = 0;
      const takeAnswer = new ivm.Callback((token: unknown, room: unknown) => {
        const json = typeof token === 'string' ? bigAnswers.get(token) : undefined;
        if (json === undefined) return '0Execution has ended';
        bigAnswers.delete(token as string);
        const admitted = holder.admitAnswer?.(json, typeof room === 'number' ? room : 0) === true;
        return admitted ? `1${json}` : '0Execution has ended';
      });
      // setTimeout: the promise resolves when the timer is due; the isolate runs the callback.
      const timer = new ivm.Reference(
        async (id: unknown, delayMs: unknown) => holder.timers?.start(id, delayMs) ?? '0',
      );
      const clearTimer = new ivm.Callback((id: unknown) => holder.timers?.clear(id), {
        ignored: true,
      });
      // Only names the isolate side may say: a limit of the list, a label of a configured tool.
      const labels = new Set([
        'dataProxy.request',
        ...this.#toolNames.map((name) => `tools.${name}`),
      ]);
      const breach = new ivm.Callback((limit: unknown, size: unknown, label: unknown) => {
        if (typeof limit !== 'string' || !bridgeLimits.has(limit)) return;
        holder.onBreach?.(
          limit as BridgeLimit,
          typeof size === 'number' && Number.isSafeInteger(size) && size >= 0 ? size : 0,
          typeof label === 'string' && labels.has(label) ? label : 'dataProxy.request',
        );
      });
      // A second run's idle probe (see probeIdle in bootstrap-source.ts): answered at once, it
      // only has to come back behind what the isolate's thread already had queued.
      const probe = new ivm.Reference(() => '1');
      const idle = new ivm.Callback(
        (requests: unknown, answers: unknown) => {
          if (!Number.isSafeInteger(requests) || !Number.isSafeInteger(answers)) return;
          holder.host?.idle?.(requests as number, answers as number);
        },
        { ignored: true },
      );
      const wasm = this.#wasm.map((module) => [
        module.name,
        module.bytes.slice().buffer,
        module.binding,
      ]);
      const bootstrap = compileBootstrap(isolate).runSync(context, {
        reference: true,
      }) as ivm.Reference<(...args: unknown[]) => unknown>;
      const functions = bootstrap.applySync(
        undefined,
        [
          status,
          data,
          new ivm.ExternalCopy(wasm).copyInto(),
          deliver,
          maxJsonDepth,
          deliverNow,
          new ivm.ExternalCopy(this.#toolNames).copyInto(),
          timer,
          clearTimer,
          breach,
          isolate,
          takeAnswer,
          probe,
          idle,
        ],
        { result: { reference: true } },
      ) as ivm.Reference<[IsolateRunFunction]>;
      bootstrap.release();
      const run = functions.getSync(0, { reference: true }) as ivm.Reference<IsolateRunFunction>;
      functions.release();
      // The first run in a fresh context sets up the bootstrap's run path (its feedback, and
      // isolated-vm's side of the call), about 0.1 ms of a user's first execution: run it once
      // now, with a trivial body, while the pool refills. Started synchronously (as a job
      // started on the calling thread is), it delivers through the blocking callback, so its
      // outcome is here when the call returns; it is forgotten, and an isolate whose warm-up
      // delivered anything else, or nothing, is not used, so no warm-up outcome can reach a
      // user's run. The next run replaces everything it set (the limits, the pending outcome),
      // and it made no status event.
      if (warm) {
        try {
          run.applySync(undefined, [warmUpCode, warmUpLimitsJson, true, false], warmUpOptions);
        } catch (error) {
          if (error !== runEnded) throw error;
        }
        if (!warmUpOutcome.test(holder.delivered ?? '')) {
          throw new Error('The isolate warm-up did not run');
        }
        holder.delivered = undefined;
        // The first warm-up of this process: its compiled run path goes into the code cache.
        if (!bootstrapCacheHasRunPath) recacheBootstrap(isolate);
      }
      const prepared: PreparedIsolate = {
        isolate,
        context,
        memoryMb,
        run,
        get host() {
          return holder.host;
        },
        set host(value) {
          holder.host = value;
        },
        get timers() {
          return holder.timers;
        },
        set timers(value) {
          holder.timers = value;
        },
        get delivered() {
          return holder.delivered;
        },
        get onSettled() {
          return holder.onSettled;
        },
        set onSettled(value) {
          holder.onSettled = value;
        },
        get admitAnswer() {
          return holder.admitAnswer;
        },
        set admitAnswer(value) {
          holder.admitAnswer = value;
        },
        get onBreach() {
          return holder.onBreach;
        },
        set onBreach(value) {
          holder.onBreach = value;
        },
      };
      return prepared;
    } catch (error) {
      disposeQuietly(isolate);
      throw error;
    }
  }
}

/**
 * A data answer as it crosses: `[text]` with an own `then` of undefined, so the resolution of the
 * isolate's promise finds no `then` to call (user code may plant one on `Array.prototype`) and
 * resolves with the array itself; V8's serializer keeps the own property.
 */
function crossing(text: string): string[] {
  // biome-ignore lint/suspicious/noThenProperty: an own `then` of undefined is the point (above).
  return Object.assign([text], { then: undefined });
}

/** The bootstrap as a function of its fourteen arguments (see bootstrap-source.ts). */
const bootstrapFunction = `(function ($0, $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13) {\n${bootstrapSource}\n})`;
/** V8's code cache of the bootstrap, made by the first isolates of this process. */
let bootstrapCache: ivm.ExternalCopy<ArrayBuffer> | undefined;
/** Whether {@link bootstrapCache} was made after a warm-up, with the run path compiled. */
let bootstrapCacheHasRunPath = false;
const bootstrapOrigin = { filename: 'sandbox:bootstrap' };

/**
 * Compiles the bootstrap in `isolate`, from V8's code cache after the first time: every isolate
 * is used once, so parsing the bootstrap's ~15 kB again would cost each execution about 0.2 ms
 * (measured: 1.19 ms without the cache, 0.96 ms with it, for context and bootstrap together).
 */
function compileBootstrap(isolate: ivm.Isolate): ivm.Script {
  const origin = bootstrapOrigin;
  if (bootstrapCache !== undefined) {
    // isolated-vm sets these on the script at run time; its typings leave them out.
    const script = isolate.compileScriptSync(bootstrapFunction, {
      ...origin,
      cachedData: bootstrapCache,
    }) as ivm.Script & { cachedDataRejected?: boolean };
    if (script.cachedDataRejected !== true) return script;
  }
  const script = isolate.compileScriptSync(bootstrapFunction, {
    ...origin,
    produceCachedData: true,
  }) as ivm.Script & ivm.CachedDataResult;
  bootstrapCache = script.cachedData;
  return script;
}

/**
 * Makes the code cache again from `isolate`, whose bootstrap ran and whose warm-up just ran: V8
 * puts in a code cache only the functions compiled so far, and the first compile of a script
 * compiles only its outer function, so the cache made then left every isolate compiling the run
 * path (the encoder, the outcome, `observe`) again in its warm-up, about 0.3 ms each. Compiling
 * the same source again in the same isolate finds the script in V8's compilation cache, with
 * those functions compiled, and the cache made from it holds their bytecode too (9 KB became
 * 12.7 KB here). Only our own code ran in this isolate (the bootstrap and a `return null` body);
 * a cache holds compiled code, not values, and isolates reject one from another V8 build.
 */
function recacheBootstrap(isolate: ivm.Isolate): void {
  bootstrapCacheHasRunPath = true;
  const script = isolate.compileScriptSync(bootstrapFunction, {
    ...bootstrapOrigin,
    produceCachedData: true,
  }) as ivm.Script & ivm.CachedDataResult;
  if (script.cachedData !== undefined) bootstrapCache = script.cachedData;
  script.release();
}

/** Disposes `isolate` unless it already is; never throws. */
export function disposeQuietly(isolate: ivm.Isolate): void {
  try {
    if (!isolate.isDisposed) isolate.dispose();
  } catch {
    // Already disposed by isolated-vm itself (memory limit) or mid-dispose: nothing left to free.
  }
}
