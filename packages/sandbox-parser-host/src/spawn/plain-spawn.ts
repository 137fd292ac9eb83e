// Starts a runner child without bubblewrap: rlimits through prlimit (RLIMIT_CPU, RLIMIT_DATA as
// a backstop, no core dumps), an empty environment, its own process group so a kill reaches
// everything it started. The degraded path, and the "same kind of limits as the seed" path.
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import type { Readable } from 'node:stream';
import type { ChildExit, ConfinementReport, ParserChild } from './child.ts';
import { nodeArguments, type RunnerPlan } from './node-command.ts';

const prlimitPath = ['/usr/bin/prlimit', '/bin/prlimit'].find((path) => existsSync(path));

/** RLIMIT_DATA below about 1 GiB stops Node 24 from starting (V8 reserves address space). */
const minimumDataLimit = 1024 * 1024 * 1024;

/** The RLIMIT_DATA backstop for a memory limit: never low enough to stop Node starting. */
export function dataLimitBytes(memoryBytes: number): number {
  return Math.max(minimumDataLimit, memoryBytes * 2);
}

/** Whether rlimits can be applied to a plain child on this machine. */
export const plainRlimitsAvailable = prlimitPath !== undefined;

/** Starts the runner as a plain child of this process. */
export function spawnPlainChild(plan: RunnerPlan, degraded: string): ParserChild {
  const node = process.execPath;
  const args = nodeArguments(plan);
  const { cpuSecs, memoryBytes } = plan.limits;
  const [file, argv] =
    prlimitPath === undefined
      ? [node, args]
      : [
          prlimitPath,
          [
            // Soft limit raises SIGXCPU; the hard limit one second later is SIGKILL.
            `--cpu=${cpuSecs}:${cpuSecs + 1}`,
            `--data=${dataLimitBytes(memoryBytes)}`,
            '--core=0',
            '--',
            node,
            ...args,
          ],
        ];
  const child = spawn(file, argv, {
    cwd: plan.cwd,
    env: {},
    stdio: ['pipe', 'pipe', 'pipe', 'pipe'],
    detached: true,
    windowsHide: true,
  });
  const exited = new Promise<ChildExit>((resolve) => {
    child.once('exit', (exitCode, signal) => resolve({ exitCode, signal }));
    child.once('error', () => resolve({ exitCode: null, signal: null }));
  });
  let killed = false;
  const confinement: ConfinementReport = {
    sandbox: 'none',
    memory: process.platform === 'linux' ? 'rss-watchdog' : 'heap-only',
    cpu: prlimitPath === undefined ? 'none' : 'rlimit',
    permissionModel: true,
    degraded,
  };
  return {
    pid: child.pid,
    stdin: child.stdin,
    stdout: child.stdout,
    stderr: child.stderr,
    response: child.stdio[3] as Readable,
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
  };
}
