// The options of `spawn`, `run` and `exec`, validated at the boundary.
import { z } from 'zod';
import { noNulString, type RlimitsInput, RlimitsSchema } from '../policy/subprocess-policy.ts';
import type { MemoryFallback } from './launch-plan.ts';

const envName = z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'expected an environment name');

/** Options of {@link SubprocessSandbox.spawn}. */
export const SpawnOptionsSchema = z.strictObject({
  /**
   * Working directory, made visible (read-only, or writable as the writable directory). Default:
   * `restrictToDirectory`, else the command's private home (Linux, bubblewrap) or the host's
   * cwd (where nothing confines the command).
   */
  cwd: noNulString.pipe(z.string().min(1)).optional(),
  /** Variables added to what the policy allows. */
  env: z.record(envName, noNulString).optional(),
  /** Extra pipes the command sees as fds 3, 4, ...; their host ends are `pipes[0]`, `pipes[1]`, .... */
  extraPipes: z.number().int().min(0).max(16).optional(),
  /** Host paths made visible read-only inside the sandbox (such as a module directory). */
  readOnlyPaths: z.array(noNulString.pipe(z.string().min(1))).optional(),
  /** Wall-clock limit for this call, replacing the policy's; 0 for none. */
  timeoutMs: z.number().int().nonnegative().max(2_147_483_647).optional(),
  /** Memory limit in MiB for this call, replacing the policy's; 0 for none. */
  maxMemoryMb: z.number().int().nonnegative().optional(),
  /** CPU seconds for this call (RLIMIT_CPU). */
  cpuSecs: z.number().int().positive().optional(),
  /** rlimits for this call, over the policy's. */
  rlimits: RlimitsSchema.partial().optional(),
  /**
   * Linux, when `maxMemoryMb` is set but no memory cgroup is writable: `'rlimit-data'` (default)
   * sets RLIMIT_DATA to the limit (which stops V8 programs from starting under about 1 GiB),
   * `'none'` runs without a memory limit (controls then list no memory mechanism), `'refuse'`
   * does not run (`SandboxUnavailableError`; `run` returns a not-started result). See
   * {@link SubprocessSandbox.capabilities} to know beforehand.
   */
  memoryFallback: z.enum(['rlimit-data', 'none', 'refuse']).optional(),
  /** Aborting kills everything the command started. */
  signal: z.instanceof(AbortSignal).optional(),
});

/** Options of {@link SubprocessSandbox.spawn} ({@link SpawnOptionsSchema}). */
export interface SpawnOptions {
  /**
   * Working directory, made visible (read-only, or writable as the writable directory). Default:
   * `restrictToDirectory`, else the command's private home (Linux, bubblewrap) or the host's
   * cwd (where nothing confines the command).
   */
  cwd?: string | undefined;
  /** Variables added to what the policy allows. */
  env?: Record<string, string> | undefined;
  /**
   * Extra pipes (0 to 16) the command sees as fds 3, 4, ...; their host ends are `pipes[0]`,
   * `pipes[1]`, .... Default 0.
   */
  extraPipes?: number | undefined;
  /** Host paths made visible read-only inside the sandbox (such as a module directory). */
  readOnlyPaths?: string[] | undefined;
  /** Wall-clock limit for this call in milliseconds, replacing the policy's; 0 for none. */
  timeoutMs?: number | undefined;
  /** Memory limit in MiB for this call, replacing the policy's; 0 for none. */
  maxMemoryMb?: number | undefined;
  /** CPU seconds for this call (RLIMIT_CPU), replacing the policy's. */
  cpuSecs?: number | undefined;
  /** rlimits for this call, over the policy's. */
  rlimits?: RlimitsInput | undefined;
  /**
   * Linux, when `maxMemoryMb` is set but no memory cgroup is writable: `'rlimit-data'` (default)
   * sets RLIMIT_DATA to the limit (which stops V8 programs from starting under about 1 GiB),
   * `'none'` runs without a memory limit (controls then list no memory mechanism), `'refuse'`
   * does not run (`SandboxUnavailableError`; `run` returns a not-started result). See
   * {@link SubprocessSandbox.capabilities} to know beforehand.
   */
  memoryFallback?: MemoryFallback | undefined;
  /** Aborting kills everything the command started. */
  signal?: AbortSignal | undefined;
}

/** Options of {@link SubprocessSandbox.run} and {@link SubprocessSandbox.exec}. */
export const RunOptionsSchema = SpawnOptionsSchema.omit({ extraPipes: true }).extend({
  /** Written to the command's stdin, which is then closed (default: empty stdin). */
  input: z
    .union([
      z.string(),
      // Not z.instanceof: its type, Uint8Array<ArrayBuffer>, refuses a value typed `Buffer`.
      z.custom<Uint8Array>((value) => value instanceof Uint8Array, 'expected a Uint8Array'),
    ])
    .optional(),
  /** Bytes kept per output stream for this call, replacing the policy's. */
  maxOutputBytes: z.number().int().positive().max(1_073_741_824).optional(),
});

/** Options of {@link SubprocessSandbox.run} and {@link SubprocessSandbox.exec} ({@link RunOptionsSchema}). */
export interface RunOptions extends Omit<SpawnOptions, 'extraPipes'> {
  /** Written to the command's stdin, which is then closed (default: empty stdin). */
  input?: string | Uint8Array | undefined;
  /** Bytes kept per output stream for this call (up to 1 GiB), replacing the policy's. */
  maxOutputBytes?: number | undefined;
}
