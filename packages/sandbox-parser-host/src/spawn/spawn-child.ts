// The one place that decides how a runner child is started: through the subprocess layer's
// confinement when it is available (and wanted), otherwise as a plain child with rlimits.
import { type Logger, SandboxUnavailableError } from '@coda/sandbox-core';
import type { ConfinementMode } from '../host/options.ts';
import type { ConfinementReport, ParserChild } from './child.ts';
import type { RunnerPlan } from './node-command.ts';
import { plainRlimitsAvailable, spawnPlainChild } from './plain-spawn.ts';

/** Starts runner children the same way for the whole life of a host. */
export interface ChildSpawner {
  /** What confines the children this spawner starts. */
  readonly confinement: ConfinementReport;
  /** Starts one child; throws `SandboxUnavailableError` when confinement is required but absent. */
  spawn(plan: RunnerPlan): ParserChild;
}

/** Chooses how children are started for `mode`, and says so once in the log. */
export function createChildSpawner(mode: ConfinementMode, logger: Logger): ChildSpawner {
  const reason =
    mode === 'none'
      ? 'confinement: none was asked for'
      : 'the subprocess layer offers no confinement here';
  const degraded = plainRlimitsAvailable ? reason : `${reason}; prlimit is missing, no RLIMIT_CPU`;
  const confinement: ConfinementReport = {
    sandbox: 'none',
    memory: process.platform === 'linux' ? 'rss-watchdog' : 'heap-only',
    cpu: plainRlimitsAvailable ? 'rlimit' : 'none',
    permissionModel: true,
    degraded,
  };
  if (mode !== 'none') logger.warn({ confinement }, 'parser children run without bubblewrap');
  return {
    confinement,
    spawn(plan) {
      if (mode === 'required') {
        throw new SandboxUnavailableError(`confinement is required but ${reason}`);
      }
      return spawnPlainChild(plan, degraded);
    },
  };
}
