// Tier 1 (isolate) and tier 2 (bridge) limits of one JavaScript execution, with their defaults.
import { z } from 'zod';
import { resolveOver } from './resolve.ts';

const positiveInt = z.number().int().positive();
const countOrZero = z.number().int().nonnegative();
/** setTimeout's ceiling; a larger delay fires at once. */
const maxTimerMs = 2_147_483_647;

/** Tier 1: limits V8 enforces on the isolate. */
export const IsolateLimitsSchema = z.strictObject({
  /** V8 heap ceiling of the isolate, in MiB (isolated-vm's minimum is 8). */
  memoryMb: z.number().int().min(8).max(65_536),
  /** Wall-clock limit of the whole execution, in milliseconds. */
  timeoutMs: positiveInt.max(maxTimerMs),
  /** Largest accepted source, in UTF-8 bytes, checked before any V8 work. */
  maxCodeBytes: positiveInt,
  /** Most `setTimeout` timers pending at once inside the isolate (0: none allowed). */
  maxTimers: countOrZero.max(10_000),
});

/** Tier 2: limits on what crosses the bridge between the isolate and the host. */
export const BridgeLimitsSchema = z.strictObject({
  /** Most `dataProxy.request()` and `tools.NAME()` calls one execution may make, together. */
  maxDataRequests: countOrZero,
  /** Most UTF-8 bytes of data request params and responses one execution may move, in total. */
  maxDataBytes: countOrZero,
  /**
   * Largest params of one data request (or tool call), in UTF-8 bytes of their JSON: measured in
   * the isolate and again in the worker, so the host never parses a larger document.
   */
  maxRequestBytes: positiveInt,
  /** Most JSON values (array elements, object members and the value itself) in one request's params. */
  maxRequestValues: positiveInt,
  /** Largest result payload, in UTF-8 bytes of its JSON. */
  maxResultBytes: positiveInt,
  /** Most `status` events one execution may emit; later ones are dropped silently. */
  maxStatusEvents: countOrZero,
  /** Most console calls one execution may make, independent of maxStatusEvents. */
  maxConsoleCalls: countOrZero,
  /** Most UTF-8 bytes of status and console messages one execution may emit, in total. */
  maxStatusBytes: countOrZero,
});

/** Every limit of one execution: tier 1 and tier 2 together. */
export const ExecutionLimitsSchema = z.strictObject({
  ...IsolateLimitsSchema.shape,
  ...BridgeLimitsSchema.shape,
});

/**
 * Tier 1: limits V8 enforces on the isolate. Validated by {@link IsolateLimitsSchema}; defaults in
 * {@link defaultIsolateLimits}.
 */
export interface IsolateLimits {
  /** V8 heap ceiling of the isolate, in MiB: 8 (isolated-vm's minimum) to 65 536. Default 256. */
  memoryMb: number;
  /** Wall-clock limit of the whole execution, in milliseconds (at most 2³¹ − 1). Default 30 000. */
  timeoutMs: number;
  /** Largest accepted source, in UTF-8 bytes, checked before any V8 work. Default 524 288. */
  maxCodeBytes: number;
  /**
   * Most `setTimeout` timers pending at once inside the isolate: one more throws a `RangeError`
   * there that names `maxTimers`. 0 (none allowed) to 10 000. Default 100. Every timer also ends
   * with its execution and never fires past `timeoutMs`.
   */
  maxTimers: number;
}

/**
 * Tier 2: limits on what crosses the bridge between the isolate and the host. Validated by
 * {@link BridgeLimitsSchema}; defaults in {@link defaultBridgeLimits}. A count may be 0: none
 * allowed.
 */
export interface BridgeLimits {
  /**
   * Most `dataProxy.request()` and `tools.NAME()` calls one execution may make, counted
   * together. Default 20.
   */
  maxDataRequests: number;
  /**
   * Most UTF-8 bytes of data request params and responses one execution may move, in total.
   * Default 52 428 800 (50 MiB).
   */
  maxDataBytes: number;
  /**
   * Largest params of one data request (or tool call), in UTF-8 bytes of their JSON: measured in
   * the isolate and again in the worker, so the host never parses a larger document.
   * Default 1 048 576 (1 MiB).
   */
  maxRequestBytes: number;
  /**
   * Most JSON values (array elements, object members and the value itself) in one request's
   * params. Default 100 000.
   */
  maxRequestValues: number;
  /** Largest result payload, in UTF-8 bytes of its JSON. Default 5 242 880 (5 MiB). */
  maxResultBytes: number;
  /** Most `status` events one execution may emit; later ones are dropped silently. Default 1 000. */
  maxStatusEvents: number;
  /** Most console calls one execution may make, independent of `maxStatusEvents`. Default 1 000. */
  maxConsoleCalls: number;
  /**
   * Most UTF-8 bytes of status and console messages one execution may emit, in total.
   * Default 1 048 576 (1 MiB).
   */
  maxStatusBytes: number;
}

/** Every limit of one execution, tier 1 and tier 2 ({@link ExecutionLimitsSchema}). */
export interface ExecutionLimits extends IsolateLimits, BridgeLimits {}

/** Tier 1 defaults: 256 MiB, 30 s, 512 KiB of code, 100 pending timers. */
export const defaultIsolateLimits: Readonly<IsolateLimits> = Object.freeze({
  memoryMb: 256,
  timeoutMs: 30_000,
  maxCodeBytes: 524_288,
  maxTimers: 100,
});

/**
 * Tier 2 defaults: 20 data requests and 50 MiB across them, 1 MiB and 100 000 values in one
 * request's params, a 5 MiB result, 1 000 status events, 1 000 console calls, 1 MiB of status.
 */
export const defaultBridgeLimits: Readonly<BridgeLimits> = Object.freeze({
  maxDataRequests: 20,
  maxDataBytes: 52_428_800,
  // 1 MiB and 100 000 values: far more than a query needs, and parsed in about a millisecond.
  maxRequestBytes: 1_048_576,
  maxRequestValues: 100_000,
  maxResultBytes: 5_242_880,
  maxStatusEvents: 1_000,
  maxConsoleCalls: 1_000,
  maxStatusBytes: 1_048_576,
});

/** Every default of one execution. */
export const defaultExecutionLimits: Readonly<ExecutionLimits> = Object.freeze({
  ...defaultIsolateLimits,
  ...defaultBridgeLimits,
});

const PartialExecutionLimitsSchema = ExecutionLimitsSchema.partial();

/**
 * Merges `partial` over `base` (the defaults unless given). Throws one
 * `SandboxValidationError` naming every bad field (negative, NaN, wrong type, unknown key).
 */
export function resolveExecutionLimits(
  partial?: Partial<ExecutionLimits>,
  base: Readonly<ExecutionLimits> = defaultExecutionLimits,
): ExecutionLimits {
  return resolveOver(PartialExecutionLimitsSchema, base, partial, 'execution limits');
}
