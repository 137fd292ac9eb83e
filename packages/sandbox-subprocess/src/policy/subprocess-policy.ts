// The policy of this package: core's SandboxPolicy extended with what OS confinement
// needs to be explicit about (strict mode, output caps, environment, rlimits, hidden paths).
import {
  defaultSandboxPolicy,
  type SandboxPolicy,
  SandboxPolicySchema,
  validate,
} from '@coda/sandbox-core';
import { z } from 'zod';
import { extraSyscallProblem, isDefaultAllowed, isKnownSyscall } from '../linux/seccomp/filter.ts';
import { type LinuxBackend, linuxBackends } from '../process/confinement.ts';

const envName = z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'expected an environment name');
/** A string the kernel can take whole: argv, env and paths end at the first NUL byte. */
export const noNulString = z
  .string()
  .refine((value) => !value.includes('\0'), 'contains a NUL byte');
const absolutePath = noNulString.pipe(
  z.string().min(1).startsWith('/', 'expected an absolute path'),
);

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

/** Per-command resource limits applied with setrlimit ({@link RlimitsSchema}). */
export interface Rlimits {
  /**
   * CPU seconds (RLIMIT_CPU); 0 derives it from `timeoutMs` (rounded up), or none without one.
   * Default 0.
   */
  cpuSecs: number;
  /** Open file descriptors (RLIMIT_NOFILE), 16 to 1 048 576. Default 1 024. */
  openFiles: number;
  /**
   * Processes and threads (pids cgroup, else RLIMIT_NPROC where the host user is not root),
   * 4 to 4 194 304. Default 256.
   */
  processes: number;
  /** Largest file a command may write, in bytes (RLIMIT_FSIZE). Default 1 GiB. */
  fileSizeBytes: number;
}

const PolicyFields = SandboxPolicySchema.extend({
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
  /**
   * Calls the default seccomp allowlist refuses, allowed anyway (Linux): a loosening, logged as a
   * warning when a sandbox takes the policy and refused by a strict policy.
   */
  extraSyscalls: z.array(
    z.string().superRefine((name, context) => {
      const problem = extraSyscallProblem(name);
      if (problem !== undefined) context.addIssue({ code: 'custom', message: problem });
    }),
  ),
  /** Refuse to run (instead of degrading) when full confinement is not available. */
  strict: z.boolean(),
  /** Linux: the weakest backend a run may get; below it every run is refused (UNAVAILABLE). */
  minimumConfinement: z.enum(linuxBackends),
  /** Bytes kept per output stream (stdout, stderr) of `run`/`exec`; the rest is dropped and flagged. */
  maxOutputBytes: z.number().int().positive().max(1_073_741_824),
  /** Host environment variables a command may see (copied when set on the host). */
  allowedEnv: z.array(envName),
  /** Variables set for every command, after `allowedEnv`. */
  env: z.record(envName, noNulString),
  /** The one directory commands may write to and run in (absolute; no symlink may lead out of it). */
  restrictToDirectory: absolutePath.optional(),
  /** Resource limits. */
  rlimits: RlimitsSchema,
  /**
   * Paths replaced by an empty directory or an empty file inside the sandbox (Linux), on top of
   * the view; a cwd or read-only path inside one is refused.
   */
  hidePaths: z.array(absolutePath),
  /** Host paths added to the view read-only for every command (Linux), e.g. a toolchain. */
  readOnlyPaths: z.array(absolutePath),
  /** Host directories added to the view writable for every command; needs `allowFileWrites`. */
  writablePaths: z.array(absolutePath),
  /**
   * Host Unix socket files a command may connect to (Linux). With none listed and the network
   * off, `connect()` is refused by seccomp; listed sockets are bound into the view and
   * `connect()` is allowed (only sockets in the view can be reached).
   */
  allowUnixSockets: z.array(absolutePath),
  /**
   * Linux, host running as root: the identity commands run as. Default (unset): uid and gid
   * 65534 (nobody), dropped inside the sandbox after bubblewrap built the view, so root-only
   * files and uid-0 sysctl rights never apply. `{ uid, gid }`: that user and group instead.
   * `'host'`: the host's own uid 0 (mapped through a user namespace), logged as a warning and
   * reported as the `identity:host` control. Ignored when the host is not root: commands then
   * run as the host's own unprivileged user.
   */
  runAs: z
    .union([
      z.literal('host'),
      z.strictObject({
        uid: z.number().int().min(1).max(4_294_967_294),
        gid: z.number().int().min(1).max(4_294_967_294),
      }),
    ])
    .optional(),
});

/** The full policy a {@link SubprocessSandbox} runs commands under. */
export const SubprocessPolicySchema = PolicyFields.refine(
  (policy) => policy.allowFileWrites || policy.writablePaths.length === 0,
  { path: ['writablePaths'], message: 'writable paths need allowFileWrites: true' },
)
  .refine((policy) => !policy.strict || policy.extraSyscalls.length === 0, {
    path: ['extraSyscalls'],
    message: 'a strict policy cannot widen the seccomp allowlist',
  })
  .superRefine((policy, context) => {
    // allowedSyscalls narrows the default; widening goes through extraSyscalls only.
    policy.allowedSyscalls?.forEach((name, index) => {
      if (isKnownSyscall(name) && !isDefaultAllowed(name) && !policy.extraSyscalls.includes(name)) {
        context.addIssue({
          code: 'custom',
          path: ['allowedSyscalls', index],
          message:
            'refused by the default seccomp allowlist (name it in extraSyscalls to allow it)',
          input: name,
        });
      }
    });
  });

/**
 * The full policy ({@link SubprocessPolicySchema}; defaults in {@link defaultSubprocessPolicy}):
 * core's {@link SandboxPolicy} plus what OS confinement needs to be explicit about.
 */
export interface SubprocessPolicy extends SandboxPolicy {
  /**
   * When given, only these of the default seccomp allowlist are allowed (Linux): each must be a
   * syscall of x86_64 or aarch64, such as `read`, that the default allows (or that
   * `extraSyscalls` names). Default: the whole default allowlist (docs/subprocess.md).
   */
  allowedSyscalls?: string[] | undefined;
  /**
   * Calls the default seccomp allowlist refuses, allowed anyway with any arguments (Linux), such
   * as `ptrace` for a debugger. A loosening: logged as a warning when a sandbox takes the policy,
   * refused by a strict policy; argument-ruled calls (`socket`, `clone`, `ioctl`, `prctl`,
   * `chmod`, ...) and probed ones (`clone3`, `io_uring_*`) cannot be named. Default none.
   */
  extraSyscalls: string[];
  /**
   * Refuse to run (instead of degrading) when full confinement is not available: on Linux, a
   * bubblewrap backend (`bubblewrap` or `bubblewrap-as-caller`). Default `false`.
   */
  strict: boolean;
  /**
   * Linux: the weakest backend a run may get, from strongest to weakest `bubblewrap`,
   * `bubblewrap-as-caller`, `landlock`, `rlimits` (see docs/subprocess.md). The backend is chosen
   * by probing what works on the host; a run below this minimum is refused with `UNAVAILABLE`
   * and the reasons, never run weaker. `'rlimits'` accepts resource limits alone (the command
   * then sees the host's whole file system and network). Ignored on macOS and Windows and when
   * `enabled` is false. Default `'landlock'`.
   */
  minimumConfinement: LinuxBackend;
  /**
   * Bytes kept per output stream (stdout, stderr) of `run`/`exec`, up to 1 GiB; the rest is
   * dropped and flagged. Default 4 MiB.
   */
  maxOutputBytes: number;
  /**
   * Host environment variables a command may see (copied when set on the host).
   * Default `PATH`, `LANG`, `LC_ALL`, `LC_CTYPE`, `TZ`, `TERM`.
   */
  allowedEnv: string[];
  /** Variables set for every command, after `allowedEnv`. Default none. */
  env: Record<string, string>;
  /**
   * The one directory commands may write to and run in: absolute, and no symlink may lead out
   * of it. Default: none.
   */
  restrictToDirectory?: string | undefined;
  /** Resource limits. */
  rlimits: Rlimits;
  /**
   * Absolute paths replaced by an empty directory or an empty file inside the sandbox (Linux),
   * on top of the view; a cwd or read-only path inside one is refused. Default none.
   */
  hidePaths: string[];
  /** Absolute host paths added to the view read-only for every command (Linux), e.g. a toolchain. */
  readOnlyPaths: string[];
  /** Absolute host directories added to the view writable for every command; needs `allowFileWrites`. */
  writablePaths: string[];
  /**
   * Absolute paths of host Unix socket files a command may connect to (Linux). With none listed
   * and the network off, `connect()` is refused by seccomp; listed sockets are bound into the
   * view and `connect()` is allowed (only sockets in the view can be reached).
   */
  allowUnixSockets: string[];
  /**
   * Linux, host running as root: the identity commands run as. Default (unset): uid and gid
   * 65534 (nobody), dropped inside the sandbox after bubblewrap built the view, so root-only
   * files and uid-0 sysctl rights never apply. `{ uid, gid }` (each 1 to 4 294 967 294): that
   * user and group instead. `'host'`: the host's own uid 0 (mapped through a user namespace),
   * logged as a warning and reported as the `identity:host` control. Ignored when the host is
   * not root: commands then run as the host's own unprivileged user.
   */
  runAs?:
    | 'host'
    | {
        /** The user id commands run as. */
        uid: number;
        /** The group id commands run as. */
        gid: number;
      }
    | undefined;
}

/**
 * A partial policy as callers pass it: any field of {@link SubprocessPolicy}, with `rlimits`
 * partial too. Fields left out keep the base's value (the defaults, or the current policy in
 * `updatePolicy`).
 */
export type SubprocessPolicyInput = {
  [Field in keyof SubprocessPolicy]?:
    | (Field extends 'rlimits' ? RlimitsInput : SubprocessPolicy[Field])
    | undefined;
};

/** Some of the {@link Rlimits}; the ones left out keep the base's (the policy's, or the defaults). */
export type RlimitsInput = { [Limit in keyof Rlimits]?: Rlimits[Limit] | undefined };

/** Defaults: core's `SandboxPolicy` ones, a 4 MiB output cap per stream and a small environment. */
export const defaultSubprocessPolicy: Readonly<SubprocessPolicy> = Object.freeze({
  ...defaultSandboxPolicy,
  strict: false,
  minimumConfinement: 'landlock',
  maxOutputBytes: 4 * 1024 * 1024,
  // Not HOME: the host's home is not in the view; commands get their private one.
  allowedEnv: ['PATH', 'LANG', 'LC_ALL', 'LC_CTYPE', 'TZ', 'TERM'],
  env: {},
  rlimits: Object.freeze({
    cpuSecs: 0,
    openFiles: 1024,
    processes: 256,
    fileSizeBytes: 1024 * 1024 * 1024,
  }),
  extraSyscalls: [],
  hidePaths: [],
  readOnlyPaths: [],
  writablePaths: [],
  allowUnixSockets: [],
});

/** Validates a {@link SubprocessPolicyInput}. */
export const PartialPolicySchema = PolicyFields.extend({
  rlimits: RlimitsSchema.partial().optional(),
}).partial();

/**
 * Merges a partial policy over `base` (the defaults unless given). Throws one
 * `SandboxValidationError` naming every bad or unknown field.
 */
export function resolveSubprocessPolicy(
  partial?: SubprocessPolicyInput,
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
