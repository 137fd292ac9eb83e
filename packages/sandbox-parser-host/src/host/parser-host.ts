// The parser host: validates each call, queues it under `maxConcurrent`, hands it to a fresh
// child (the warm spare when the limits match) and turns whatever happens into a ParserResult.
import { mkdtempSync, rmSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import {
  isSandboxError,
  type JsonValue,
  type ParserLimits,
  resolveParserLimits,
  SandboxValidationError,
  utf8ByteLength,
  validate,
} from '@coda/sandbox-core';
import type { z } from 'zod';
import { protocolVersion } from '../protocol/wire.ts';
import type { ConfinementReport } from '../spawn/child.ts';
import type { IsolateServerFiles, RunnerPlan } from '../spawn/node-command.ts';
import { type ChildSpawner, createChildSpawner } from '../spawn/spawn-child.ts';
import { CallQueue } from './call-queue.ts';
import { ForkServerSlot } from './fork-server.ts';
import { ForkServerPool } from './fork-server-pool.ts';
import { IsolateServer } from './isolate-server.ts';
import { IsolateServerPool } from './isolate-server-pool.ts';
import { findIsolatedVmAddon } from './isolated-vm-addon.ts';
import {
  hostDefaults,
  type ParserHostOptions,
  ParserHostOptionsSchema,
  type ResolvedHostSettings,
  type RunParserOptions,
  RunParserOptionsSchema,
} from './options.ts';
import { resolveReadablePaths } from './read-paths.ts';
import { type ParserResult, refusedResult } from './result.ts';
import { type CallRequest, RunnerProcess } from './runner-process.ts';
import { chooseRuntime } from './runtime-choice.ts';
import { type RunnerPool, SparePool } from './spare-pool.ts';

/** A host that runs parser functions of one module in short-lived, confined children. */
export interface ParserHost {
  /**
   * Calls the module's export `parserName` with `payload` (and `options.kwargs`) in a fresh child
   * and resolves to its result. Never rejects: every failure is a result with `ok: false`.
   */
  runParser<Data = JsonValue>(
    parserName: string,
    payload: unknown,
    options?: RunParserOptions,
  ): Promise<ParserResult<Data>>;
  /** What confined the last child this host started (also in every result); undefined before. */
  readonly confinement: ConfinementReport | undefined;
  /** The host's settings after defaults. */
  readonly settings: Readonly<Omit<ResolvedHostSettings, 'logger'>>;
  /** Calls running and waiting now. */
  readonly load: {
    /** Calls with a child running now. */
    running: number;
    /** Calls waiting in the queue for a free slot. */
    queued: number;
  };
  /**
   * Resolves once every warm spare is ready for a request, starting those that are due (at once when
   * `warmSpare` is off or the host is closed).
   */
  warm(): Promise<void>;
  /** Ends running calls (`CANCELLED`), refuses new ones, kills the spares and removes the cwd. */
  close(): Promise<void>;
  /** Same as {@link ParserHost.close}, for `await using`. */
  [Symbol.asyncDispose](): Promise<void>;
}

/**
 * The isolate child's memory beyond its calls' isolates: Node, isolated-vm and the requests and
 * answers in flight (its cgroup, or the watchdog, is this plus every slot's call memory).
 */
const isolateChildBaseBytes = 256 * 1024 * 1024;

/** Longer names are refused: the name comes back in `Unknown parser: NAME`. */
const maxParserNameLength = 1024;

/** What serves one call: a child of its own, or a fork-server slot. */
interface CallRunner {
  /** The process started for it (bwrap's when confined). */
  readonly child: { readonly pid: number | undefined };
  run(request: CallRequest, startedAt: number): Promise<ParserResult>;
}

function refuseOption(path: string, received: unknown, message: string): never {
  throw new SandboxValidationError(`Invalid parser host options: ${path}: ${message}`, {
    issues: [{ path, message, received: JSON.stringify(received) }],
  });
}

function describeError(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

class Host implements ParserHost {
  readonly settings: Readonly<Omit<ResolvedHostSettings, 'logger'>>;
  readonly #logger: ResolvedHostSettings['logger'];
  readonly #spawner: ChildSpawner;
  readonly #queue: CallQueue;
  readonly #plan: Omit<RunnerPlan, 'limits'>;
  readonly #closing = new AbortController();
  readonly #active = new Set<Promise<unknown>>();
  readonly #spares: RunnerPool<CallRunner>;
  /** The isolated-vm addon (`processModel: 'isolate'` only). */
  readonly #isolateFiles: IsolateServerFiles | undefined;

  constructor(options: ParserHostOptions) {
    const parsed = validate(ParserHostOptionsSchema, options, 'parser host options');
    const { logger = hostDefaults.logger, limits, allowRead = [], ...rest } = parsed;
    // Real paths only, and no symlink that leads a parser out of what it may read.
    const { modulePath, readPaths } = resolveReadablePaths(parsed.module, allowRead);
    const { runtime, python } = chooseRuntime(modulePath, rest);
    const warmSpare = rest.warmSpare ?? hostDefaults.warmSpare;
    const processModel = rest.processModel ?? hostDefaults.processModel;
    if (processModel === 'fork-server' && runtime !== 'python') {
      refuseOption('processModel', processModel, 'a fork server needs runtime python');
    }
    if (processModel === 'fork-server' && (!warmSpare || rest.spares === 0)) {
      refuseOption('processModel', processModel, 'a fork server needs spares (at least 1)');
    }
    if (processModel === 'isolate' && runtime !== 'node') {
      refuseOption('processModel', processModel, 'the isolate model needs runtime node');
    }
    if (processModel === 'isolate' && rest.spares !== undefined && rest.spares !== 1) {
      refuseOption('spares', rest.spares, "processModel 'isolate' keeps one child per host");
    }
    this.#isolateFiles = processModel === 'isolate' ? findIsolatedVmAddon() : undefined;
    const settings: ResolvedHostSettings = {
      limits: resolveParserLimits(limits as Partial<ParserLimits> | undefined),
      maxConcurrent: rest.maxConcurrent ?? availableParallelism(),
      maxQueued: rest.maxQueued ?? hostDefaults.maxQueued,
      maxPayloadBytes: rest.maxPayloadBytes ?? hostDefaults.maxPayloadBytes,
      maxOutputBytes: rest.maxOutputBytes ?? hostDefaults.maxOutputBytes,
      maxStderrBytes: rest.maxStderrBytes ?? hostDefaults.maxStderrBytes,
      warmSpare,
      spares: warmSpare ? (rest.spares ?? hostDefaults.spares) : 0,
      processModel,
      runtime,
      ...(python === undefined ? {} : { python: python.executable }),
      confinement: rest.confinement ?? hostDefaults.confinement,
      logger,
    };
    const { logger: _, ...visible } = settings;
    this.settings = Object.freeze(visible);
    this.#logger = logger;
    this.#spawner = createChildSpawner(settings.confinement, logger, runtime, {
      network: parsed.network,
      lookup: parsed.lookup,
    });
    this.#spares =
      processModel === 'fork-server'
        ? new ForkServerPool(settings.spares, () => this.#startForkServer())
        : processModel === 'isolate'
          ? new IsolateServerPool(warmSpare, () => this.#startIsolateServer())
          : new SparePool(settings.spares, () => this.#startSpare());
    this.#queue = new CallQueue(settings.maxConcurrent, settings.maxQueued);
    this.#plan = {
      moduleUrl: pathToFileURL(modulePath).href,
      modulePath,
      readPaths,
      runtime,
      ...(python === undefined ? {} : { python }),
      cwd: mkdtempSync(join(tmpdir(), 'coda-parser-')),
    };
    this.#replenish();
  }

  get confinement(): ConfinementReport | undefined {
    return this.#spawner.confinement;
  }

  get load(): { running: number; queued: number } {
    return { running: this.#queue.running, queued: this.#queue.queued };
  }

  async warm(): Promise<void> {
    // Between a call's result and its scheduled replacement there is no spare: start it now.
    this.#replenish();
    await this.#spares.ready();
  }

  runParser<Data = JsonValue>(
    parserName: string,
    payload: unknown,
    options?: RunParserOptions,
  ): Promise<ParserResult<Data>> {
    const call = this.#run(parserName, payload, options).catch((error: unknown) =>
      // Nothing below should throw; if it does, it is still a result, never a rejection.
      refusedResult('CRASH', `parser host failed: ${describeError(error)}`),
    );
    this.#active.add(call);
    void call.finally(() => this.#active.delete(call));
    return call as Promise<ParserResult<Data>>;
  }

  async #run(parserName: unknown, payload: unknown, options: unknown): Promise<ParserResult> {
    if (this.#closing.signal.aborted) return refusedResult('UNAVAILABLE', 'parser host is closed');
    const prepared = this.#prepare(parserName, payload, options);
    if ('error' in prepared) return prepared.error;
    const { body, limits, signal, isolateParts } = prepared;
    if (
      this.settings.processModel === 'isolate' &&
      limits.memoryBytes > this.settings.limits.memoryBytes
    ) {
      // The one child is sized for the host's limit per call; more would crowd the other calls.
      return refusedResult(
        'VALIDATION',
        `memoryBytes ${limits.memoryBytes} is over the host's limits.memoryBytes (${this.settings.limits.memoryBytes}), the most a call may ask for with processModel 'isolate'`,
      );
    }
    const refusal = await this.#queue.admit(signal);
    if (refusal === 'full') {
      return refusedResult('CAPACITY', `parser host queue is full (${this.settings.maxQueued})`);
    }
    if (refusal === 'aborted') return refusedResult('CANCELLED', 'parser call cancelled');
    if (refusal === 'closed') return refusedResult('UNAVAILABLE', 'parser host is closed');
    const startedAt = performance.now();
    try {
      let runner: CallRunner;
      try {
        runner = this.#takeChild(limits);
      } catch (error) {
        const code = isSandboxError(error) ? error.code : 'CRASH';
        return refusedResult(code, `cannot start a parser child: ${describeError(error)}`);
      }
      const result = await runner.run(
        { body, isolateParts, limits, signal, closing: this.#closing.signal },
        startedAt,
      );
      // A new spare starts once this call has its result: spawning costs the host several
      // milliseconds of synchronous work (and a core), which would otherwise delay this call.
      if (this.#spares.needsFill) setImmediate(() => this.#replenish());
      this.#logger.debug(
        { parser: parserName, ok: result.ok, code: result.code, durationMs: result.durationMs },
        'parser call finished',
      );
      return result;
    } finally {
      this.#queue.release();
    }
  }

  /** Validates a call and encodes its request, or says why it is refused. */
  #prepare(
    parserName: unknown,
    payload: unknown,
    options: unknown,
  ):
    | {
        body: Buffer;
        isolateParts: { envelope: string; payloadJson: string };
        limits: ParserLimits;
        signal: AbortSignal | undefined;
      }
    | { error: ParserResult } {
    let parsed: z.output<typeof RunParserOptionsSchema>;
    try {
      if (
        typeof parserName !== 'string' ||
        parserName.length === 0 ||
        parserName.length > maxParserNameLength
      ) {
        throw new SandboxValidationError(
          `Invalid parser name: expected a string of 1 to ${maxParserNameLength} characters`,
        );
      }
      parsed = validate(RunParserOptionsSchema, options ?? {}, 'runParser options');
    } catch (error) {
      return { error: refusedResult('VALIDATION', describeError(error)) };
    }
    const { signal, ...given } = parsed;
    // zod rebuilt the record; serialise what the caller gave, so an own `__proto__` key stays.
    const kwargs = (options as RunParserOptions | undefined)?.kwargs ?? {};
    const limits = { ...this.settings.limits };
    if (given.timeout !== undefined) limits.timeout = given.timeout;
    if (given.memoryBytes !== undefined) limits.memoryBytes = given.memoryBytes;
    if (given.cpuSecs !== undefined) limits.cpuSecs = given.cpuSecs;
    let payloadJson: string;
    let kwargsJson: string;
    try {
      payloadJson = JSON.stringify(payload) ?? 'null';
      kwargsJson = JSON.stringify(kwargs);
    } catch (error) {
      return { error: refusedResult('VALIDATION', `payload is not JSON: ${describeError(error)}`) };
    }
    const size = utf8ByteLength(payloadJson) + utf8ByteLength(kwargsJson);
    if (size > this.settings.maxPayloadBytes) {
      return {
        error: refusedResult(
          'VALIDATION',
          `payload is ${size} bytes, over maxPayloadBytes (${this.settings.maxPayloadBytes})`,
        ),
      };
    }
    const envelope = JSON.stringify({
      v: protocolVersion,
      parser: parserName,
      kwargs: JSON.parse(kwargsJson) as unknown,
      limits: { ...limits, maxOutputBytes: this.settings.maxOutputBytes },
    });
    // Spliced in rather than stringified again: the payload can be megabytes.
    const body =
      this.settings.processModel === 'isolate'
        ? Buffer.alloc(0)
        : Buffer.from(`${envelope.slice(0, -1)},"payload":${payloadJson}}`, 'utf8');
    return { body, isolateParts: { envelope, payloadJson }, limits, signal };
  }

  #takeChild(limits: ParserLimits): CallRunner {
    const spare = this.#spares.take(limits);
    if (spare === undefined) return this.#spawn(limits);
    const taken =
      spare instanceof ForkServerSlot
        ? 'a fork-server slot'
        : spare instanceof IsolateServer
          ? 'the isolate child'
          : 'the warm spare';
    this.#logger.debug({ pid: spare.child.pid }, `parser call takes ${taken}`);
    return spare;
  }

  #spawn(limits: ParserLimits): RunnerProcess {
    const child = this.#spawner.spawn({ ...this.#plan, limits });
    this.#logger.debug({ pid: child.pid }, 'parser child started');
    return new RunnerProcess(child, limits, this.settings);
  }

  #startSpare(): RunnerProcess {
    const spare = this.#spawn(this.settings.limits);
    void spare.child.exited.then(() => {
      // Exited without a call: it died waiting (the pool drops it, a call replaces it).
      if (!spare.served) {
        this.#logger.warn({ pid: spare.child.pid }, 'warm spare exited while waiting');
      }
    });
    return spare;
  }

  #startForkServer(): ForkServerSlot {
    const { limits } = this.settings;
    const child = this.#spawner.spawn({ ...this.#plan, limits, forkServer: true });
    this.#logger.debug({ pid: child.pid }, 'parser fork server started');
    return new ForkServerSlot(child, limits, this.settings);
  }

  /** A call lost with the shared child, run again on a child of its own (see RunAlone). */
  async #runAlone(request: CallRequest, startedAt: number): Promise<ParserResult> {
    let server: IsolateServer;
    try {
      server = this.#startIsolateServer(false);
    } catch (error) {
      const code = isSandboxError(error) ? error.code : 'CRASH';
      return refusedResult(code, `cannot start a parser child: ${describeError(error)}`);
    }
    try {
      // Its wall clock's backstop starts when it is sent: not while this child reads the module.
      await server.ready;
      return await server.run(request, startedAt);
    } finally {
      server.retire();
    }
  }

  /** The shared isolate child, or (`shared` false) one for a single call run again alone. */
  #startIsolateServer(shared = true): IsolateServer {
    const { limits, maxConcurrent } = this.settings;
    // Every call the queue lets run at once may hold its full memory limit in its isolate.
    const slots = shared ? maxConcurrent : 1;
    const memoryBytes = isolateChildBaseBytes + slots * limits.memoryBytes;
    const child = this.#spawner.spawn({
      ...this.#plan,
      limits: { ...limits, memoryBytes },
      isolateServer: this.#isolateFiles as IsolateServerFiles,
    });
    this.#logger.debug({ pid: child.pid }, 'parser isolate child started');
    const server = new IsolateServer(
      child,
      memoryBytes,
      this.settings,
      shared ? (request, startedAt) => this.#runAlone(request, startedAt) : undefined,
    );
    void child.exited.then((exit) => {
      // A child for one call run again alone is retired after it: no news.
      if (shared && !this.#closing.signal.aborted) {
        this.#logger.warn({ pid: child.pid, exit }, 'parser isolate child exited');
      }
    });
    return server;
  }

  #replenish(): void {
    if (this.#closing.signal.aborted) return;
    try {
      this.#spares.fill();
    } catch (error) {
      this.#logger.warn({ error: describeError(error) }, 'cannot start a warm spare');
    }
  }

  async close(): Promise<void> {
    if (!this.#closing.signal.aborted) {
      this.#closing.abort();
      this.#queue.close();
      this.#spares.discardAll();
    }
    await Promise.allSettled([...this.#active]);
    rmSync(this.#plan.cwd, { recursive: true, force: true });
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }
}

/**
 * Creates a parser host for one module. Throws `SandboxValidationError` naming each bad option
 * (and when the module file does not exist); starts the warm spare unless `warmSpare: false`.
 */
export function createParserHost(options: ParserHostOptions): ParserHost {
  return new Host(options);
}
