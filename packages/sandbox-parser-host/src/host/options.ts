// The host's options and the per-call options, validated with zod at the public boundary.
import {
  type JsonObject,
  type JsonValue,
  type Logger,
  type NetworkPolicy,
  NetworkPolicySchema,
  type ParserLimits,
  ParserLimitsSchema,
  silentLogger,
} from '@coda/sandbox-core';
import { z } from 'zod';

const byteCount = z
  .number()
  .int()
  .positive()
  .max(2 ** 31 - 1);

/** How much OS confinement the host asks of `@coda/sandbox-subprocess`. */
export const ConfinementModeSchema = z.enum(['auto', 'required', 'none']);

/**
 * How much OS confinement the host asks of `@coda/sandbox-subprocess`, whose probe picks the
 * backend (bubblewrap, else Landlock + seccomp where bubblewrap cannot run). `auto`: that backend
 * when there is one, otherwise rlimits, the permission model and a memory watchdog, reported in
 * every result. `required`: refuse to run a call without OS confinement (`UNAVAILABLE`): at least
 * the Landlock backend. `none`: never use the subprocess layer's confinement (the permission model
 * and rlimits still apply).
 */
export type ConfinementMode = 'auto' | 'required' | 'none';

/** The language the parser module is written in, and so the runner its children run. */
export const ParserRuntimeSchema = z.enum(['node', 'python']);

/**
 * The language of the parser module: `node` (an ES module whose exported functions are the
 * parsers) or `python` (a `.py` module whose public functions are the parsers).
 */
export type ParserRuntime = 'node' | 'python';

/** How a host's calls get their process: see {@link ProcessModel}. */
export const ProcessModelSchema = z.enum(['spawn', 'fork-server', 'isolate']);

/**
 * How a call gets its process. `spawn` (the default): every call gets a child of its own, in a
 * sandbox of its own, started for it or waiting as a warm spare; nothing of one call's process
 * or sandbox is there for the next. `fork-server` (Python only): each of `spares` slots is one
 * sandbox (its own memory cgroup and rlimits) holding a zygote that has loaded the module and
 * forks a fresh child per call, one call at a time; a call that ends in anything but an answer
 * (timeout, crash, OOM, a process left behind) has its slot's sandbox killed and replaced.
 * Every call still runs in a fresh process that never held another call's payload, but calls of
 * one slot share that sandbox and start from the zygote's state (see docs/parser-host.md).
 * Calls that find no idle slot, or ask for more memory than the default, are spawned.
 * `isolate` (Node only, pure-JavaScript parsers; needs the optional peer dependency
 * `isolated-vm`): one long-lived child per host, confined like the spawned ones, runs every call
 * in a fresh isolated-vm isolate (its own heap, no Node APIs, disposed after the call); the
 * module and its relative imports are loaded as source, and any other import is refused. Calls
 * share that child, so a V8 or isolated-vm bug would cross calls (see docs/parser-host.md).
 */
export type ProcessModel = 'spawn' | 'fork-server' | 'isolate';

/** Options of {@link createParserHost}. */
export const ParserHostOptionsSchema = z
  .strictObject({
    /** The parser module: a path or a `file:` URL whose named exports are the parser functions. */
    module: z.union([z.string().min(1), z.instanceof(URL)]),
    /** The module's language; default `python` for a `.py` module, else `node`. */
    runtime: ParserRuntimeSchema.optional(),
    /** The Python interpreter (a path, or a name looked up on `PATH`); default `python3`. */
    python: z.string().min(1).optional(),
    /** Warm children kept started with the default limits (0 to 64); default 1, 0 without `warmSpare`. */
    spares: z.number().int().nonnegative().max(64).optional(),
    /** Default limits of every call (10 s wall clock, 256 MiB, 5 s CPU unless set). */
    limits: ParserLimitsSchema.partial().optional(),
    /** Children running at once; further calls wait in a FIFO queue. Default: available cores. */
    maxConcurrent: z.number().int().positive().max(1024).optional(),
    /** Calls that may wait in the queue; one more is refused at once (`CAPACITY`). Default 10 000. */
    maxQueued: z.number().int().nonnegative().optional(),
    /** Largest payload plus kwargs, in UTF-8 bytes of their JSON; checked before a child starts. */
    maxPayloadBytes: byteCount.optional(),
    /** Largest response body, in UTF-8 bytes; a larger result is an error. */
    maxOutputBytes: byteCount.optional(),
    /** Bytes of the child's console output (stdout and stderr) kept in `result.stderr`. */
    maxStderrBytes: z
      .number()
      .int()
      .nonnegative()
      .max(2 ** 31 - 1)
      .optional(),
    /** Keep `spares` children started and waiting for the next calls with the default limits. */
    warmSpare: z.boolean().optional(),
    /** `spawn` (a child per call), `fork-server` (Python) or `isolate` (Node); see {@link ProcessModel}. */
    processModel: ProcessModelSchema.optional(),
    /** Further paths the child may read (the parser module's directory is always readable). */
    allowRead: z.array(z.string().min(1)).optional(),
    /** OS confinement through `@coda/sandbox-subprocess`; see {@link ConfinementMode}. */
    confinement: ConfinementModeSchema.optional(),
    /** Egress allowlist for parsers' network use, through the subprocess layer's proxy. */
    network: NetworkPolicySchema.optional(),
    /** How the egress proxy resolves names; default the system resolver. */
    lookup: z
      .custom<ParserHostLookup>((value) => typeof value === 'function', 'expected a function')
      .optional(),
    /** Where the host logs spawns, degraded confinement and kills; silent by default. */
    logger: z
      .custom<Logger>(
        (value) =>
          typeof value === 'object' &&
          value !== null &&
          ['debug', 'info', 'warn', 'error'].every(
            (method) => typeof (value as Record<string, unknown>)[method] === 'function',
          ),
        'expected a logger with debug, info, warn and error methods',
      )
      .optional(),
  })
  .refine((options) => options.network === undefined || options.processModel !== 'isolate', {
    path: ['network'],
    message:
      "a network allowlist is not available with processModel 'isolate': parsers there have no Node APIs and no network at all",
  })
  .refine((options) => options.network === undefined || options.confinement !== 'none', {
    // Named by the field that must change, so the error shows its value ("none").
    path: ['confinement'],
    message:
      "a network allowlist needs confinement 'auto' or 'required' (the egress proxy is the only way out of a confined child; an unconfined one would ignore it)",
  });

/** Resolves a host name to its addresses for the egress proxy (see `network`). */
export type ParserHostLookup = (
  hostname: string,
) => Promise<readonly { readonly address: string; readonly family: number }[]>;

/** Options of {@link createParserHost} ({@link ParserHostOptionsSchema}). */
export interface ParserHostOptions {
  /** The parser module: a path or a `file:` URL whose named exports are the parser functions. */
  module: string | URL;
  /**
   * The module's language: `node` (exported functions are parsers) or `python` (public
   * functions are parsers, run by `python3 -I`). Default: `python` when the module's name ends
   * in `.py`, else `node`.
   */
  runtime?: ParserRuntime | undefined;
  /**
   * The Python interpreter for `runtime: 'python'`: a path, or a name looked up on `PATH`
   * (Python 3.9 or newer). Default `python3`. Children run its real executable, found once when
   * the host is created.
   */
  python?: string | undefined;
  /**
   * Children kept started with the default limits, module loaded, each waiting for one call, so
   * that calls back to back do not wait for a child to start (0 to 64). Default 1 (0 when
   * `warmSpare` is `false`).
   */
  spares?: number | undefined;
  /** Default limits of every call; each left out is the default (10 s wall clock, 256 MiB, 5 s CPU). */
  limits?: { [Limit in keyof ParserLimits]?: ParserLimits[Limit] | undefined } | undefined;
  /** Children running at once (1 to 1 024); further calls wait in a FIFO queue. Default: available cores. */
  maxConcurrent?: number | undefined;
  /** Calls that may wait in the queue; one more is refused at once (`CAPACITY`). Default 10 000. */
  maxQueued?: number | undefined;
  /**
   * Largest payload plus kwargs, in UTF-8 bytes of their JSON; checked before a child starts
   * (`VALIDATION`). Default 16 MiB.
   */
  maxPayloadBytes?: number | undefined;
  /** Largest response body, in UTF-8 bytes; a larger result is a `VALIDATION` failure. Default 16 MiB. */
  maxOutputBytes?: number | undefined;
  /** Bytes of the child's console output (stdout and stderr) kept in `result.stderr`. Default 64 KiB. */
  maxStderrBytes?: number | undefined;
  /**
   * Keep children started (`spares` of them) and waiting for the next calls with the default
   * limits, so a call does not wait for the interpreter to start. Default `true`.
   */
  warmSpare?: boolean | undefined;
  /**
   * How a call gets its process: `spawn` (a child and a sandbox per call) or, for a Python
   * module, `fork-server` (`spares` sandboxed zygotes fork a fresh child per call, which meets
   * issue 25's throughput targets) or, for a pure-JavaScript Node module, `isolate` (one
   * confined child runs each call in a fresh isolated-vm isolate: no Node APIs, needs the
   * optional peer dependency `isolated-vm`); see {@link ProcessModel}. Default `spawn`.
   */
  processModel?: ProcessModel | undefined;
  /** Further paths the child may read (the parser module's directory is always readable). */
  allowRead?: string[] | undefined;
  /** OS confinement through `@coda/sandbox-subprocess`; see {@link ConfinementMode}. Default `auto`. */
  confinement?: ConfinementMode | undefined;
  /**
   * Egress allowlist: parsers reach the network only through the subprocess layer's proxy
   * (their `fetch` uses it: `NODE_USE_ENV_PROXY=1` is set), which allows these hosts and
   * refuses the rest with a 403 naming the reason; each result's `network` reports what the
   * call reached and what was refused. Needs confinement `auto` or `required`, and bubblewrap
   * (the child's own network namespace) or Landlock ABI 4 or later (TCP connect to the proxy's
   * port only): without either the call fails `UNAVAILABLE`. Python parsers have no network
   * (the runner refuses the socket module). Default: no network at all.
   */
  network?: NetworkPolicy | undefined;
  /** How the egress proxy resolves names (with `network`); default the system resolver. */
  lookup?: ParserHostLookup | undefined;
  /** Where the host logs spawns, degraded confinement and kills; silent by default. */
  logger?: Logger | undefined;
}

/** Options of one `runParser` call; limits left out take the host's defaults. */
export const RunParserOptionsSchema = z.strictObject({
  /** Wall-clock limit in milliseconds. */
  timeout: ParserLimitsSchema.shape.timeout.optional(),
  /** Memory limit in bytes. */
  memoryBytes: ParserLimitsSchema.shape.memoryBytes.optional(),
  /** CPU-time limit in whole seconds. */
  cpuSecs: ParserLimitsSchema.shape.cpuSecs.optional(),
  /** Passed to the parser as its second argument (keyword arguments). */
  // Values are typed, not checked, here: serialising the call checks they are JSON.
  kwargs: z.record(z.string(), z.custom<JsonValue>()).optional(),
  /** Aborting it ends the call (queued or running) with `code: CANCELLED`. */
  signal: z.instanceof(AbortSignal).optional(),
});

/** Options of one `runParser` call ({@link RunParserOptionsSchema}). */
export interface RunParserOptions {
  /** Wall-clock limit in milliseconds (default: the host's, 10 000). */
  timeout?: number | undefined;
  /** Memory limit in bytes, at least 16 MiB (default: the host's, 268 435 456). */
  memoryBytes?: number | undefined;
  /** CPU-time limit in whole seconds (default: the host's, 5). */
  cpuSecs?: number | undefined;
  /** Passed to the parser as its second argument; must be JSON (a `VALIDATION` failure if not). */
  kwargs?: JsonObject | undefined;
  /** Aborting it ends the call (queued or running) with `code: CANCELLED`. */
  signal?: AbortSignal | undefined;
}

/** The host's settings after defaults were applied. */
export interface ResolvedHostSettings {
  /** Default limits of every call. */
  limits: ParserLimits;
  /** Children running at once. */
  maxConcurrent: number;
  /** Calls that may wait in the queue. */
  maxQueued: number;
  /** Largest payload plus kwargs, in UTF-8 bytes of their JSON. */
  maxPayloadBytes: number;
  /** Largest response body, in UTF-8 bytes. */
  maxOutputBytes: number;
  /** Bytes of console output kept in `result.stderr`. */
  maxStderrBytes: number;
  /** Whether a warm spare child is kept. */
  warmSpare: boolean;
  /** Warm children kept waiting (0 when `warmSpare` is false); fork-server slots. */
  spares: number;
  /** How a call gets its process. */
  processModel: ProcessModel;
  /** The module's language. */
  runtime: ParserRuntime;
  /** The real path of the Python interpreter children run (`python` runtime only). */
  python?: string;
  /** How much OS confinement is asked for. */
  confinement: ConfinementMode;
  /** Where the host logs. */
  logger: Logger;
}

/** Defaults of the host options that are not limits. */
export const hostDefaults = Object.freeze({
  maxQueued: 10_000,
  maxPayloadBytes: 16 * 1024 * 1024,
  maxOutputBytes: 16 * 1024 * 1024,
  maxStderrBytes: 64 * 1024,
  warmSpare: true,
  spares: 1,
  processModel: 'spawn' as ProcessModel,
  confinement: 'auto' as ConfinementMode,
  logger: silentLogger,
});
