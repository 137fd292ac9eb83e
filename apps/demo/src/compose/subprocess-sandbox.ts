// The subprocess sandbox with the policy an agent's commands should get: no network, no writes,
// a short clock and a memory ceiling. On Linux with bubblewrap that means namespaces, seccomp,
// a read-only root and a cgroup; elsewhere it degrades to limits and says so in every result.
import type { Logger } from '@coda/sandbox-core';
import {
  createSandbox,
  type SubprocessPolicyInput,
  type SubprocessSandbox,
} from '@coda/sandbox-subprocess';

/** Seed 004's policy fields, set as tight as a command from an agent deserves. */
export const restrictivePolicy: Readonly<SubprocessPolicyInput> = Object.freeze({
  enabled: true,
  allowNetwork: false,
  allowFileWrites: false,
  timeoutMs: 5_000,
  maxMemoryMb: 256,
});

/** A sandbox under {@link restrictivePolicy}; `logger` receives the degraded-mode warning. */
export function createRestrictedSandbox(logger?: Logger): SubprocessSandbox {
  return createSandbox(restrictivePolicy, logger === undefined ? {} : { logger });
}
