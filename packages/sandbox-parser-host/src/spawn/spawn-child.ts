// The one place that decides how a runner child is started: through the subprocess layer's
// confinement (bubblewrap, cgroup, seccomp) unless `confinement: 'none'`, otherwise as a plain
// child with rlimits. Both run the same prlimit + node command.
import type { Logger } from '@coda/sandbox-core';
import type { ConfinementMode } from '../host/options.ts';
import type { ConfinementReport, ParserChild } from './child.ts';
import { ConfinedSpawner } from './confined-spawn.ts';
import type { RunnerPlan } from './node-command.ts';
import { spawnPlainChild } from './plain-spawn.ts';
import { rlimitsAvailable } from './runner-command.ts';

/** Starts runner children the same way for the whole life of a host. */
export interface ChildSpawner {
  /** What confined the last child started (undefined before the first). */
  readonly confinement: ConfinementReport | undefined;
  /** Starts one child; throws `SandboxUnavailableError` when confinement is required but absent. */
  spawn(plan: RunnerPlan): ParserChild;
}

const unconfined: ConfinementReport = Object.freeze({
  sandbox: 'none',
  memory: process.platform === 'linux' ? 'rss-watchdog' : 'heap-only',
  cpu: rlimitsAvailable ? 'rlimit' : 'none',
  permissionModel: true,
  degraded: `confinement: 'none' was asked for${rlimitsAvailable ? '' : '; prlimit is missing, no RLIMIT_CPU'}`,
});

/** Chooses how children are started for `mode`; warns once when they run without bubblewrap. */
export function createChildSpawner(mode: ConfinementMode, logger: Logger): ChildSpawner {
  if (mode === 'none') {
    return { confinement: unconfined, spawn: (plan) => spawnPlainChild(plan, unconfined) };
  }
  const confined = new ConfinedSpawner(mode, logger);
  let last: ConfinementReport | undefined;
  return {
    get confinement() {
      return last;
    },
    spawn(plan) {
      const child = confined.spawn(plan);
      if (last === undefined && child.confinement.sandbox === 'none') {
        logger.warn({ confinement: child.confinement }, 'parser children run without bubblewrap');
      }
      last = child.confinement;
      return child;
    },
  };
}
