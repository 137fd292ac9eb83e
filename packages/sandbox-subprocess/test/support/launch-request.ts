// A LaunchRequest for the generator tests (macOS, Windows), built without touching the file system.

import {
  resolveSubprocessPolicy,
  type SubprocessPolicyInput,
} from '../../src/policy/subprocess-policy.ts';
import type { LaunchRequest } from '../../src/process/launch-plan.ts';

/** A request to run `/usr/bin/python3 -c "print(1)"` in /Users/dev/project under `policy`. */
export function launchRequest(policy: SubprocessPolicyInput = {}, writable = true): LaunchRequest {
  const resolved = resolveSubprocessPolicy(policy);
  return {
    policy: resolved,
    limits: {
      timeoutMs: resolved.timeoutMs,
      maxMemoryMb: resolved.maxMemoryMb,
      cpuSecs: 30,
      rlimits: resolved.rlimits,
      memoryFallback: 'rlimit-data',
    },
    executable: '/usr/bin/python3',
    args: ['-c', "print('it''s 1')"],
    cwd: '/Users/dev/project',
    writableDirectory: writable ? '/Users/dev/project' : undefined,
    writableField: writable ? 'cwd' : undefined,
    readOnlyPaths: [],
    writablePaths: [],
    unixSockets: [],
    hiddenPaths: [],
    extraPipes: 0,
    hostPath: '/usr/bin:/bin',
    env: { PATH: '/usr/bin:/bin', TMPDIR: '/private/var/folders/xy/T/' },
  };
}
