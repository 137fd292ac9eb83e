// Starts runner children through `@coda/sandbox-subprocess`, on the backend its probe chose:
// bubblewrap (no network, read-only root, private /tmp, seccomp, namespaces, new session) or,
// where bubblewrap cannot run, Landlock and seccomp; a memory cgroup where one is writable.
// The runner command inside is the same prlimit + node as the plain path.
import { dirname } from 'node:path';
import type { Readable } from 'node:stream';
import type { Logger, NetworkPolicy } from '@coda/sandbox-core';
import {
  createSandbox,
  SandboxControl,
  type SandboxedProcess,
  type SubprocessSandbox,
} from '@coda/sandbox-subprocess';
import type { ParserHostLookup } from '../host/options.ts';
import {
  type ChildExit,
  type ConfinementReport,
  interpreterGuard,
  type ParserChild,
  toParserChild,
} from './child.ts';
import type { RunnerPlan } from './node-command.ts';
import { packageScopes } from './package-scopes.ts';
import { pythonReadPaths } from './python-command.ts';
import { runnerCommand } from './runner-command.ts';
import { isolateRunnerPath, jsonCostPath, runnerPath, wirePath } from './runner-files.ts';

const mebibyte = 1024 * 1024;
const memoryCgroups = new Set<string>([
  SandboxControl.memoryCgroupV1,
  SandboxControl.memoryCgroupV2,
]);

/** A parser host's egress allowlist and resolver, passed on to the subprocess layer. */
export interface ChildEgress {
  readonly network?: NetworkPolicy | undefined;
  readonly lookup?: ParserHostLookup | undefined;
}

/** Starts confined children, with a memory cgroup where the subprocess layer can make one. */
export class ConfinedSpawner {
  readonly #sandbox: SubprocessSandbox;

  /**
   * `required`: at least the Landlock backend, else every call is refused; `auto` accepts the
   * subprocess layer's rlimits-only fallback too (the permission model and watchdog still apply).
   */
  constructor(mode: 'auto' | 'required', logger: Logger, egress: ChildEgress = {}) {
    this.#sandbox = createSandbox(
      {
        enabled: true,
        minimumConfinement: mode === 'required' ? 'landlock' : 'rlimits',
        // The host runs its own wall clock: the spare must wait without one.
        timeoutMs: 0,
        maxMemoryMb: 0,
        allowNetwork: false,
        allowFileWrites: false,
        allowedEnv: [],
        env: {},
        rlimits: { processes: 64, openFiles: 256 },
        // With an allowlist the child gets its own network namespace and the egress proxy.
        ...(egress.network === undefined ? {} : { network: egress.network }),
      },
      { logger, lookup: egress.lookup },
    );
  }

  /** Starts one child; throws `SandboxUnavailableError` when required and no backend confines. */
  spawn(plan: RunnerPlan): ParserChild {
    const { file, args } = runnerCommand(plan);
    const child = this.#sandbox.spawn(file, args, {
      // No host cwd: under bubblewrap the child starts in its private, empty, read-only home.
      extraPipes: plan.forkServer === true || plan.isolateServer !== undefined ? 2 : 1,
      maxMemoryMb: Math.ceil(plan.limits.memoryBytes / mebibyte),
      // Without a writable memory cgroup the layer would fall back to RLIMIT_DATA at the limit,
      // which stops Node from starting; the host's RSS watchdog bounds memory instead.
      memoryFallback: 'none',
      // A Python child needs no package scopes: only Node's loader reads package.json files.
      readOnlyPaths:
        plan.runtime === 'python'
          ? [...pythonReadPaths(plan), ...plan.readPaths]
          : plan.isolateServer !== undefined
            ? [
                process.execPath,
                isolateRunnerPath,
                wirePath,
                jsonCostPath,
                plan.isolateServer.addonPath,
                ...plan.readPaths,
                ...packageScopes([
                  dirname(isolateRunnerPath),
                  dirname(wirePath),
                  dirname(jsonCostPath),
                  ...plan.readPaths,
                ]),
              ]
            : [
                process.execPath,
                runnerPath,
                wirePath,
                jsonCostPath,
                ...plan.readPaths,
                ...packageScopes([
                  dirname(runnerPath),
                  dirname(wirePath),
                  dirname(jsonCostPath),
                  ...plan.readPaths,
                ]),
              ],
    });
    return wrap(
      child,
      child.controls.some((control) => memoryCgroups.has(control)),
      plan.runtime ?? 'node',
    );
  }
}

function wrap(
  child: SandboxedProcess,
  cgroupMemory: boolean,
  runtime: 'node' | 'python',
): ParserChild {
  const backend = child.confinement;
  const confinement: ConfinementReport = {
    sandbox: backend.startsWith('bubblewrap')
      ? 'bubblewrap'
      : backend === 'landlock'
        ? 'landlock'
        : 'none',
    backend,
    memory: cgroupMemory ? 'cgroup' : 'rss-watchdog',
    cpu: 'rlimit',
    ...interpreterGuard(runtime),
    controls: child.controls,
  };
  if (backend === 'landlock') {
    confinement.degraded =
      'bubblewrap cannot run here: Landlock and seccomp confine the child (no namespaces)';
  } else if (!child.sandboxApplied) confinement.degraded = 'bubblewrap is not available';
  const exited = child.exited.then(
    (exit): ChildExit => ({
      exitCode: exit.exitCode,
      signal: exit.signal as NodeJS.Signals | null,
      memoryExceeded: exit.memoryExceeded,
    }),
  );
  return toParserChild(child, {
    response: child.pipes[0] as Readable,
    control: child.pipes[1] as Readable | undefined,
    exited,
    confinement,
    kill: () => child.kill(),
    network: child.network,
  });
}
