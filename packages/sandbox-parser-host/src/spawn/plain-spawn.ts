// Starts a runner child without the subprocess layer: the rlimits of `runnerCommand`, an empty
// environment, its own process group so a kill reaches everything it started. The degraded
// path, and the "same kind of limits as the seed" path of the benchmark.
import { spawn } from 'node:child_process';
import type { Readable } from 'node:stream';
import {
  type ChildExit,
  type ConfinementReport,
  type ParserChild,
  toParserChild,
} from './child.ts';
import type { RunnerPlan } from './node-command.ts';
import { runnerCommand } from './runner-command.ts';

/** Starts the runner as a plain child of this process. */
export function spawnPlainChild(plan: RunnerPlan, confinement: ConfinementReport): ParserChild {
  const { file, args } = runnerCommand(plan);
  const child = spawn(file, args, {
    cwd: plan.cwd,
    env: {},
    stdio:
      plan.forkServer === true || plan.isolateServer !== undefined
        ? ['pipe', 'pipe', 'pipe', 'pipe', 'pipe']
        : ['pipe', 'pipe', 'pipe', 'pipe'],
    detached: true,
    windowsHide: true,
  });
  const exited = new Promise<ChildExit>((resolve) => {
    child.once('exit', (exitCode, signal) => resolve({ exitCode, signal }));
    child.once('error', () => resolve({ exitCode: null, signal: null }));
  });
  let killed = false;
  return toParserChild(child, {
    response: child.stdio[3] as Readable,
    control: (child.stdio[4] ?? undefined) as Readable | undefined,
    exited,
    confinement,
    kill() {
      if (killed || child.pid === undefined) return;
      if (child.exitCode !== null || child.signalCode !== null) return;
      killed = true;
      try {
        // The negative pid is the process group `detached` created.
        process.kill(-child.pid, 'SIGKILL');
      } catch {
        child.kill('SIGKILL');
      }
    },
  });
}
