// The one place that decides how a runner child is started: through the subprocess layer's
// confinement (bubblewrap, cgroup, seccomp) unless `confinement: 'none'`, otherwise as a plain
// child with rlimits. Both run the same prlimit + node command.
import type { Logger } from '@coda/sandbox-core';
import type { ConfinementMode } from '../host/options.ts';
import { type ConfinementReport, interpreterGuard, type ParserChild } from './child.ts';
import { type ChildEgress, ConfinedSpawner } from './confined-spawn.ts';
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

function unconfined(runtime: 'node' | 'python'): ConfinementReport {
  // The Python runner sets its rlimits itself; a Node child needs prlimit for them.
  const rlimits = runtime === 'python' || rlimitsAvailable;
  return Object.freeze({
    sandbox: 'none',
    memory: process.platform === 'linux' ? 'rss-watchdog' : 'heap-only',
    cpu: rlimits ? 'rlimit' : 'none',
    ...interpreterGuard(runtime),
    degraded: `confinement: 'none' was asked for${rlimits ? '' : '; prlimit is missing, no RLIMIT_CPU'}`,
  });
}

/** Chooses how children are started for `mode`; warns once when they run without bubblewrap. */
export function createChildSpawner(
  mode: ConfinementMode,
  logger: Logger,
  runtime: 'node' | 'python' = 'node',
  egress: ChildEgress = {},
): ChildSpawner {
  if (mode === 'none') {
    const report = unconfined(runtime);
    return { confinement: report, spawn: (plan) => spawnPlainChild(plan, report) };
  }
  const confined = new ConfinedSpawner(mode, logger, egress);
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
