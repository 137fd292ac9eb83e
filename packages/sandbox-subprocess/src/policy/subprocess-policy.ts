// The policy of this package: core's seed-004 SandboxPolicy extended with what OS confinement
// needs to be explicit about (strict mode, output caps, environment, rlimits, hidden paths).
import {
  defaultSandboxPolicy,
  type SandboxPolicy,
  SandboxPolicySchema,
  validate,
} from '@coda/sandbox-core';
import { z } from 'zod';
import { isKnownSyscall } from '../linux/seccomp/filter.ts';

const envName = z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'expected an environment name');
const absolutePath = z.string().min(1).startsWith('/', 'expected an absolute path');

/** Per-command resource limits applied with setrlimit (through `prlimit`). */
export const RlimitsSchema = z.strictObject({
  /** CPU seconds (RLIMIT_CPU); 0 derives it from `timeoutMs` (rounded up), or none without one. */
  cpuSecs: z.number().int().nonnegative(),
  /** Open file descriptors (RLIMIT_NOFILE). */
  openFiles: z.number().int().min(16).max(1_048_576),
  /** Processes and threads (pids cgroup, else RLIMIT_NPROC where the host user is not root). */
  processes: z.number().int().min(4).max(4_194_304),
  /** Largest file a command may write, in bytes (RLIMIT_FSIZE). */
  fileSizeBytes: z.number().int().positive(),
});

/** Per-command resource limits. */
export type Rlimits = z.infer<typeof RlimitsSchema>;

/** The full policy a {@link SubprocessSandbox} runs commands under. */
export const SubprocessPolicySchema = SandboxPolicySchema.extend({
  allowedSyscalls: z
    .array(
      z
        .string()
        .regex(/^[a-z0-9_]+$/, 'expected a syscall name such as "read"')
        .refine(
          (name) => !/^[a-z0-9_]+$/.test(name) || isKnownSyscall(name),
          'unknown syscall on x86_64 and aarch64',
        ),
    )
    .optional(),
  /** Refuse to run (instead of degrading) when full confinement is not available. */
  strict: z.boolean(),
  /** Bytes kept per output stream (stdout, stderr) of `run`/`exec`; the rest is dropped and flagged. */
  maxOutputBytes: z.number().int().positive().max(1_073_741_824),
  /** Host environment variables a command may see (copied when set on the host). */
  allowedEnv: z.array(envName),
  /** Variables set for every command, after `allowedEnv`. */
  env: z.record(envName, z.string()),
  /** Resource limits. */
  rlimits: RlimitsSchema,
  /** Host paths replaced by an empty directory inside the sandbox (Linux), such as `/root`. */
  hidePaths: z.array(absolutePath),
  /**
   * Linux, host running as root: run the command as this unprivileged user and group (through
   * util-linux `setpriv`, after the cgroups are joined), so root-only files stay unreadable.
   * The program, the cwd and the read-only paths must be readable by it, the writable
   * directory writable.
   */
  runAs: z
    .strictObject({
      uid: z.number().int().min(1).max(4_294_967_294),
      gid: z.number().int().min(1).max(4_294_967_294),
    })
    .optional(),
});

/** The full policy: seed 004's fields plus this package's. */
export type SubprocessPolicy = z.infer<typeof SubprocessPolicySchema>;

/** A partial policy as callers pass it; `rlimits` may be partial too. */
export type SubprocessPolicyInput = Partial<Omit<SubprocessPolicy, 'rlimits'>> & {
  rlimits?: Partial<Rlimits>;
};

/** Defaults: seed 004's plus a 4 MiB output cap per stream and a small environment. */
export const defaultSubprocessPolicy: Readonly<SubprocessPolicy> = Object.freeze({
  ...defaultSandboxPolicy,
  strict: false,
  maxOutputBytes: 4 * 1024 * 1024,
  allowedEnv: ['PATH', 'HOME', 'LANG', 'LC_ALL', 'LC_CTYPE', 'TZ', 'TERM'],
  env: {},
  rlimits: Object.freeze({
    cpuSecs: 0,
    openFiles: 1024,
    processes: 256,
    fileSizeBytes: 1024 * 1024 * 1024,
  }),
  hidePaths: [],
});

const PartialPolicySchema = SubprocessPolicySchema.extend({
  rlimits: RlimitsSchema.partial().optional(),
}).partial();

/**
 * Merges a partial policy over `base` (the defaults unless given). Throws one
 * `SandboxValidationError` naming every bad or unknown field.
 */
export function resolveSubprocessPolicy(
  partial?: SubprocessPolicyInput | Partial<SandboxPolicy>,
  base: Readonly<SubprocessPolicy> = defaultSubprocessPolicy,
): SubprocessPolicy {
  const parsed = validate(PartialPolicySchema, partial ?? {}, 'sandbox policy');
  const merged: Record<string, unknown> = { ...base };
  for (const [key, value] of Object.entries(parsed)) {
    if (value === undefined) continue;
    merged[key] = key === 'rlimits' ? { ...base.rlimits, ...(value as object) } : value;
  }
  return validate(SubprocessPolicySchema, merged, 'sandbox policy');
}
