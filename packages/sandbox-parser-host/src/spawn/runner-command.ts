// The full command of a runner child: prlimit (RLIMIT_CPU with a soft limit one second under
// the hard one, so the CPU limit shows as SIGXCPU and not as an anonymous SIGKILL; RLIMIT_DATA
// as a backstop; no core files) in front of node. The same command runs plain or under bwrap.
import { existsSync } from 'node:fs';
import { isolateNodeArguments } from './isolate-command.ts';
import { nodeArguments, type RunnerPlan } from './node-command.ts';
import { pythonCommand } from './python-command.ts';

const prlimitPath = ['/usr/bin/prlimit', '/bin/prlimit'].find((path) => existsSync(path));

/** Whether rlimits can be applied to a child on this machine. */
export const rlimitsAvailable = prlimitPath !== undefined;

/** RLIMIT_DATA below about 1 GiB stops Node 24 from starting (V8 reserves address space). */
const minimumDataLimit = 1024 * 1024 * 1024;

/** The RLIMIT_DATA backstop for a memory limit: never low enough to stop Node starting. */
export function dataLimitBytes(memoryBytes: number): number {
  return Math.max(minimumDataLimit, memoryBytes * 2);
}

/** The executable and arguments that start the runner for `plan`. */
export function runnerCommand(plan: RunnerPlan): { file: string; args: string[] } {
  if (plan.runtime === 'python') return pythonCommand(plan);
  const node = process.execPath;
  const { isolateServer } = plan;
  const args =
    isolateServer === undefined
      ? nodeArguments(plan)
      : isolateNodeArguments({ ...plan, isolateServer });
  if (prlimitPath === undefined) return { file: node, args };
  const { cpuSecs, memoryBytes } = plan.limits;
  if (isolateServer !== undefined) {
    // Long-lived: RLIMIT_CPU would add up every call's time; each isolate bounds its own. No
    // RLIMIT_DATA: every isolate reserves address space for its code and heap, and 8 of them
    // under the limit failed ("Failed to reserve virtual memory for CodeRange", SIGTRAP); the
    // memory cgroup or the host's watchdog bounds the child, each isolate's heap limit a call.
    return { file: prlimitPath, args: ['--core=0', '--', node, ...args] };
  }
  return {
    file: prlimitPath,
    args: [
      `--cpu=${cpuSecs}:${cpuSecs + 1}`,
      `--data=${dataLimitBytes(memoryBytes)}`,
      '--core=0',
      '--',
      node,
      ...args,
    ],
  };
}
