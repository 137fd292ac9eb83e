// The command line of a Python runner child. The limits are not set by prlimit here: the runner
// sets RLIMIT_AS and RLIMIT_CPU itself before it imports the module, as seed 004's child does
// (Python, unlike V8, runs under an address-space limit).
import type { RunnerPlan } from './node-command.ts';
import { pythonRunnerPath } from './runner-files.ts';

/**
 * `-I`: isolated mode (no PYTHON* variables, no user site, not even the runner's directory on
 * sys.path); `-S`: no site import (no site-packages); `-B`: no bytecode written. The runner
 * then leaves only the module's directory and the standard library importable.
 */
export const pythonFlags = ['-I', '-S', '-B'] as const;

/** The executable and arguments that start the Python runner for `plan`. */
export function pythonCommand(plan: RunnerPlan): { file: string; args: string[] } {
  if (plan.python === undefined || plan.modulePath === undefined) {
    throw new Error('a python runner plan needs the interpreter and the module path');
  }
  const config = {
    module: plan.modulePath,
    // The module's directory is readable anyway; the rest of readPaths is allowRead.
    readPaths: plan.readPaths.slice(1),
    memoryBytes: plan.limits.memoryBytes,
    cpuSecs: plan.limits.cpuSecs,
    ...(plan.forkServer === true ? { forkServer: true } : {}),
  };
  return {
    file: plan.python.executable,
    args: [...pythonFlags, pythonRunnerPath, JSON.stringify(config)],
  };
}

/** What a confined Python child must be able to read besides `plan.readPaths`. */
export function pythonReadPaths(plan: RunnerPlan): string[] {
  return plan.python === undefined
    ? []
    : [plan.python.executable, pythonRunnerPath, ...plan.python.stdlib];
}
