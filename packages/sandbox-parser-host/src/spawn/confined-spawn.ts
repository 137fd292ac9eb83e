// Starts runner children through `@coda/sandbox-subprocess`: bubblewrap (no network, read-only
// root, private /tmp, seccomp, namespaces, new session), a memory cgroup where one is writable,
// a pid-namespace kill. The runner command inside is the same prlimit + node as the plain path.
import type { Readable } from 'node:stream';
import type { Logger } from '@coda/sandbox-core';
import {
  createSandbox,
  SandboxControl,
  type SandboxedProcess,
  type SubprocessSandbox,
} from '@coda/sandbox-subprocess';
import {
  type ChildExit,
  type ConfinementReport,
  type ParserChild,
  toParserChild,
} from './child.ts';
import type { RunnerPlan } from './node-command.ts';
import { runnerCommand } from './runner-command.ts';
import { runnerPath, wirePath } from './runner-files.ts';

const mebibyte = 1024 * 1024;
const memoryCgroups = new Set<string>([
  SandboxControl.memoryCgroupV1,
  SandboxControl.memoryCgroupV2,
]);

/** Starts confined children; learns on its first spawn whether a memory cgroup applies. */
export class ConfinedSpawner {
  readonly #sandbox: SubprocessSandbox;
  readonly #logger: Logger;
  /**
   * Whether the memory limit can go to a cgroup. Without one the subprocess layer would fall
   * back to RLIMIT_DATA at the limit, which stops Node from starting; then the host passes no
   * memory limit to it and bounds memory with its own watchdog and a 1 GiB RLIMIT_DATA instead.
   */
  #cgroupMemory: boolean | undefined;

  constructor(strict: boolean, logger: Logger) {
    this.#logger = logger;
    this.#sandbox = createSandbox(
      {
        enabled: true,
        strict,
        // The host runs its own wall clock: the spare must wait without one.
        timeoutMs: 0,
        maxMemoryMb: 0,
        allowNetwork: false,
        allowFileWrites: false,
        allowedEnv: [],
        env: {},
        rlimits: { processes: 64, openFiles: 256 },
      },
      { logger },
    );
  }

  /** Starts one child; throws `SandboxUnavailableError` when strict and bwrap is missing. */
  spawn(plan: RunnerPlan): ParserChild {
    const memoryMb = Math.ceil(plan.limits.memoryBytes / mebibyte);
    if (this.#cgroupMemory !== false) {
      const started = this.#start(plan, memoryMb);
      if (this.#cgroupMemory === true) return wrap(started, true);
      this.#cgroupMemory = started.controls.some((control) => memoryCgroups.has(control));
      if (this.#cgroupMemory) return wrap(started, true);
      started.kill();
      this.#logger.warn('no memory cgroup for parser children: using the RSS watchdog');
    }
    return wrap(this.#start(plan, 0), false);
  }

  #start(plan: RunnerPlan, memoryMb: number): SandboxedProcess {
    const { file, args } = runnerCommand(plan);
    return this.#sandbox.spawn(file, args, {
      cwd: plan.cwd,
      extraPipes: 1,
      maxMemoryMb: memoryMb,
      readOnlyPaths: [process.execPath, runnerPath, wirePath, ...plan.readPaths],
    });
  }
}

function wrap(child: SandboxedProcess, cgroupMemory: boolean): ParserChild {
  const confinement: ConfinementReport = {
    sandbox: child.sandboxApplied ? 'bubblewrap' : 'none',
    memory: cgroupMemory ? 'cgroup' : 'rss-watchdog',
    cpu: 'rlimit',
    permissionModel: true,
    controls: child.controls,
  };
  if (!child.sandboxApplied) confinement.degraded = 'bubblewrap is not available';
  const exited = child.exited.then(
    (exit): ChildExit => ({
      exitCode: exit.exitCode,
      signal: exit.signal as NodeJS.Signals | null,
      memoryExceeded: exit.memoryExceeded,
    }),
  );
  return toParserChild(child, {
    response: child.pipes[0] as Readable,
    exited,
    confinement,
    kill: () => child.kill(),
  });
}
