// The subprocess sandbox policy, with its defaults.
import { z } from 'zod';
import { resolveOver } from './resolve.ts';

/** The policy a `SubprocessSandbox` runs commands under. */
export const SandboxPolicySchema = z.strictObject({
  /** Confine commands at all. */
  enabled: z.boolean(),
  /** Wall-clock limit per command in milliseconds; 0 means none. */
  timeoutMs: z.number().int().nonnegative().max(2_147_483_647),
  /** Memory limit per command in MiB; 0 means none. */
  maxMemoryMb: z.number().int().nonnegative(),
  /** Let commands use the network. */
  allowNetwork: z.boolean(),
  /** Let commands write files (only inside `restrictToDirectory` or the cwd, and a private /tmp). */
  allowFileWrites: z.boolean(),
  /** The one directory commands may write to and run in. */
  restrictToDirectory: z.string().min(1).optional(),
  /** When given, only these syscalls are allowed (allowlist mode); names as in the kernel tables. */
  allowedSyscalls: z
    .array(z.string().regex(/^[a-z0-9_]+$/, 'expected a syscall name such as "read"'))
    .optional(),
});

/**
 * The policy a `SubprocessSandbox` runs commands under ({@link SandboxPolicySchema}; defaults in
 * {@link defaultSandboxPolicy}). `@coda/sandbox-subprocess` extends it with confinement details.
 */
export interface SandboxPolicy {
  /** Confine commands at all. Default `true`. */
  enabled: boolean;
  /** Wall-clock limit per command in milliseconds; 0 means none. Default 30 000. */
  timeoutMs: number;
  /** Memory limit per command in MiB; 0 means none. Default 512. */
  maxMemoryMb: number;
  /** Let commands use the network. Default `true`. */
  allowNetwork: boolean;
  /**
   * Let commands write files (only inside `restrictToDirectory` or the cwd, and a private `/tmp`).
   * Default `true`.
   */
  allowFileWrites: boolean;
  /** The one directory commands may write to and run in. Default: none. */
  restrictToDirectory?: string | undefined;
  /**
   * When given, only these syscalls are allowed, narrowing the sandbox's default allowlist;
   * names as in the kernel's tables, such as `read`. Default: the default allowlist.
   */
  allowedSyscalls?: string[] | undefined;
}

/** The defaults: enabled, 30 s, 512 MiB, network and file writes allowed. */
export const defaultSandboxPolicy: Readonly<SandboxPolicy> = Object.freeze({
  enabled: true,
  timeoutMs: 30_000,
  maxMemoryMb: 512,
  allowNetwork: true,
  allowFileWrites: true,
});

const PartialSandboxPolicySchema = SandboxPolicySchema.partial();

/** Merges `partial` over `base` (the defaults unless given); throws naming every bad field. */
export function resolveSandboxPolicy(
  partial?: Partial<SandboxPolicy>,
  base: Readonly<SandboxPolicy> = defaultSandboxPolicy,
): SandboxPolicy {
  return resolveOver(PartialSandboxPolicySchema, base, partial, 'sandbox policy');
}
