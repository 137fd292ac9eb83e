// Limits of one parser child, with their defaults.
import { z } from 'zod';
import { resolveOver } from './resolve.ts';

/** Limits of one `runParser` call. */
export const ParserLimitsSchema = z.strictObject({
  /** Wall-clock limit in milliseconds, after which the child and all it started are killed. */
  timeout: z.number().int().positive().max(2_147_483_647),
  /** Memory limit of the child, in bytes. */
  memoryBytes: z
    .number()
    .int()
    .min(16 * 1024 * 1024),
  /** CPU-time limit of the child, in whole seconds (RLIMIT_CPU). */
  cpuSecs: z.number().int().positive(),
});

/** Limits of one `runParser` call ({@link ParserLimitsSchema}; defaults in {@link defaultParserLimits}). */
export interface ParserLimits {
  /**
   * Wall-clock limit in milliseconds (at most 2³¹ − 1), after which the child and all it started
   * are killed. Default 10 000.
   */
  timeout: number;
  /** Memory limit of the child, in bytes; at least 16 MiB. Default 268 435 456 (256 MiB). */
  memoryBytes: number;
  /** CPU-time limit of the child, in whole seconds (RLIMIT_CPU). Default 5. */
  cpuSecs: number;
}

/** The defaults: 10 s wall clock, 256 MiB, 5 s CPU. */
export const defaultParserLimits: Readonly<ParserLimits> = Object.freeze({
  timeout: 10_000,
  memoryBytes: 268_435_456,
  cpuSecs: 5,
});

const PartialParserLimitsSchema = ParserLimitsSchema.partial();

/** Merges `partial` over `base` (the defaults unless given); throws naming every bad field. */
export function resolveParserLimits(
  partial?: Partial<ParserLimits>,
  base: Readonly<ParserLimits> = defaultParserLimits,
): ParserLimits {
  return resolveOver(PartialParserLimitsSchema, base, partial, 'parser limits');
}
