export { loadSandboxConfig, loosenedFields } from './config/config-file.ts';
export {
  type ConfigAppliedEvent,
  type ConfigInvalidEvent,
  type ConfigWatcherEvents,
  type ConfigWatcherOptions,
  SandboxConfigWatcher,
  watchSandboxConfig,
} from './config/config-watcher.ts';
export { seatbeltProfile } from './darwin/seatbelt.ts';
export type { SyscallGroup } from './linux/seccomp/allowlist.ts';
export type { ArgumentRule, ArgumentTest } from './linux/seccomp/argument-rules.ts';
export {
  buildSeccompFilter,
  type SeccompFilterOptions,
  seccompAllowlist,
} from './linux/seccomp/filter.ts';
export type { MemoryMechanism, SandboxCapabilities } from './platform/capabilities.ts';
export type { Platform } from './platform/platform.ts';
export {
  defaultSubprocessPolicy,
  type Rlimits,
  type RlimitsInput,
  RlimitsSchema,
  resolveSubprocessPolicy,
  type SubprocessPolicy,
  type SubprocessPolicyInput,
  SubprocessPolicySchema,
} from './policy/subprocess-policy.ts';
export { type Confinement, type LinuxBackend, linuxBackends } from './process/confinement.ts';
export { SandboxControl } from './process/controls.ts';
export type { MemoryFallback } from './process/launch-plan.ts';
export type {
  SandboxFailure,
  SandboxFailureCode,
  SandboxResult,
  SandboxResultFields,
  SandboxSuccess,
} from './process/sandbox-result.ts';
export type { ProcessExit, SandboxedProcess } from './process/sandboxed-process.ts';
export {
  type RunOptions,
  RunOptionsSchema,
  type SpawnOptions,
  SpawnOptionsSchema,
} from './process/spawn-options.ts';
export {
  createSandbox,
  degradedWarning,
  extraSyscallsWarning,
  SubprocessSandbox,
  type SubprocessSandboxOptions,
} from './sandbox.ts';
export { jobObjectScript } from './win32/job-object.ts';
