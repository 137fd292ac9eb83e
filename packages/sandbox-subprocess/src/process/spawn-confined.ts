// The one machinery behind spawn, run, exec: validate, resolve paths, build the platform's launch
// plan, start it, and make sure that a timeout, an abort or the command's own exit
// leaves nothing running.
import { type ChildProcess, type StdioOptions, spawn } from 'node:child_process';
import { realpathSync, statSync } from 'node:fs';
import type { Duplex, Writable } from 'node:stream';
import { SandboxUnavailableError, SandboxValidationError, validate } from '@coda/sandbox-core';
import { resolveOutsideHidden } from '../linux/checked-path.ts';
import type { PrestartPool } from '../linux/prestart-pool.ts';
import { type SetIdSweep, sweepSetIdFiles, sweepSetIdFilesAsync } from '../linux/setid-sweep.ts';
import { currentPlatform, type Platform } from '../platform/platform.ts';
import { platformPlan } from '../platform/platform-plan.ts';
import type { SubprocessPolicy } from '../policy/subprocess-policy.ts';
import { commandEnvironment } from './environment.ts';
import type { EgressEndpoints, LaunchPlan, LaunchRequest, RunLimits } from './launch-plan.ts';
import { resolveExecutable } from './resolve-executable.ts';
import type { ProcessExit, SandboxedProcess } from './sandboxed-process.ts';
import { type SpawnOptions, SpawnOptionsSchema } from './spawn-options.ts';

/** What the machinery needs from the sandbox that calls it. */
export interface SpawnContext {
  readonly policy: SubprocessPolicy;
  /** How the run reaches the sandbox's egress proxy, when the policy has `network`. */
  readonly egress?: EgressEndpoints | undefined;
  /** The sandbox's pre-started sandboxes (Linux), which its runs take when they fit. */
  readonly prestart?: PrestartPool | undefined;
  /** Called when a command runs without OS confinement (the sandbox logs a warning once). */
  readonly onDegraded: (reason: string | undefined) => void;
  readonly platform?: Platform;
}

/** A validated command with its platform plan, before anything runs. */
export interface PreparedLaunch {
  readonly request: LaunchRequest;
  readonly plan: LaunchPlan;
  readonly platform: Platform;
  readonly signal: AbortSignal | undefined;
}

/**
 * Validates the options, resolves paths and builds the platform's plan. Throws a
 * `SandboxValidationError` for bad options and a `SandboxUnavailableError` for a missing
 * program or a strict policy that cannot be met.
 */
export function prepareLaunch(
  context: SpawnContext,
  file: string,
  args: readonly string[],
  rawOptions: SpawnOptions | undefined,
  synchronous = false,
): PreparedLaunch {
  const options = validate(SpawnOptionsSchema, rawOptions ?? {}, 'spawn options');
  if (typeof file !== 'string' || file === '') {
    throw invalid('file', 'expected a non-empty string', typeof file);
  }
  if (!Array.isArray(args) || !args.every((arg) => typeof arg === 'string')) {
    throw invalid(
      'args',
      'expected an array of strings',
      Array.isArray(args) ? '[array]' : typeof args,
    );
  }
  // The kernel ends every argv and env string at a NUL: refuse rather than run something else.
  if (file.includes('\0')) throw invalid('file', 'contains a NUL byte', JSON.stringify(file));
  args.forEach((arg, index) => {
    if (arg.includes('\0'))
      throw invalid(`args.${index}`, 'contains a NUL byte', JSON.stringify(arg));
  });
  const { policy } = context;
  const platform = context.platform ?? currentPlatform();
  if (policy.network !== undefined && (platform !== 'linux' || !policy.enabled)) {
    // Never a route around the proxy: without a network namespace the run does not start.
    throw new SandboxUnavailableError(
      `A network allowlist needs Linux with bubblewrap or Landlock and confinement enabled (platform ${platform}, enabled ${policy.enabled})`,
      { details: { reason: 'network policy unsupported here' } },
    );
  }
  const request = {
    ...buildRequest(policy, file, args, options),
    synchronous,
    egress: context.egress,
    prestart: context.prestart,
  };
  const plan = platformPlan(platform, request);
  if (!plan.sandboxApplied && policy.enabled) {
    if (policy.strict) {
      releasePlan(plan);
      throw new SandboxUnavailableError(
        `Refusing to run unconfined (strict policy): ${plan.fallbackReason ?? 'no OS sandbox on this platform'}`,
        { details: { reason: plan.fallbackReason ?? 'unsupported platform' } },
      );
    }
    context.onDegraded(plan.fallbackReason);
  }
  return { request, plan, platform, signal: options.signal };
}

/** Validates, plans and starts one command; throws only for invalid options or refusals. */
export function spawnConfined(
  context: SpawnContext,
  file: string,
  args: readonly string[],
  rawOptions: SpawnOptions | undefined,
): SandboxedProcess {
  const prepared = prepareLaunch(context, file, args, rawOptions);
  try {
    return start(prepared.plan, prepared.request, prepared.signal, prepared.platform);
  } catch (error) {
    releasePlan(prepared.plan);
    throw error;
  }
}

/** One `SandboxValidationError` for one bad field, worded like core's `validate()`. */
function invalid(
  path: string,
  message: string,
  received: string,
  what = 'command',
): SandboxValidationError {
  return new SandboxValidationError(`Invalid ${what}: ${path}: ${message} (got ${received})`, {
    issues: [{ path, message, received }],
  });
}

function buildRequest(
  policy: SubprocessPolicy,
  file: string,
  args: readonly string[],
  options: ReturnType<typeof SpawnOptionsSchema.parse>,
): LaunchRequest {
  const hiddenPaths = policy.hidePaths.flatMap((path) => realOrNothing(path));
  const checked = (path: string, field: string): string =>
    resolveOutsideHidden(path, field, hiddenPaths);
  const directory = (path: string, field: string): string => {
    const real = checked(path, field);
    if (!statSync(real).isDirectory()) {
      throw invalid(field, 'not a directory', JSON.stringify(path), 'spawn options');
    }
    return real;
  };
  const restrict =
    policy.restrictToDirectory === undefined
      ? undefined
      : directory(policy.restrictToDirectory, 'restrictToDirectory');
  const cwd = options.cwd !== undefined ? directory(options.cwd, 'cwd') : restrict;
  if (restrict !== undefined && cwd !== restrict && !cwd!.startsWith(`${restrict}/`)) {
    throw invalid('cwd', 'outside restrictToDirectory', JSON.stringify(cwd), 'spawn options');
  }
  const writableDirectory = policy.allowFileWrites ? (restrict ?? cwd) : undefined;
  const writableField = restrict !== undefined ? 'restrictToDirectory' : 'cwd';
  if (writableDirectory === '/') {
    // Writes "only in the cwd" would be writes anywhere: a host started from / must say where.
    throw invalid(
      writableField,
      'the writable directory cannot be / (set restrictToDirectory or allowFileWrites: false)',
      '"/"',
      'spawn options',
    );
  }
  const env = commandEnvironment(policy, options.env);
  const found = resolveExecutable(file, cwd ?? process.cwd(), env.PATH);
  if (found === undefined) {
    throw new SandboxUnavailableError(`Command not found: ${file}`, { details: { file } });
  }
  const limits = runLimits(policy, options);
  const fields = (paths: readonly string[], name: string): [string, string][] =>
    paths.map((path, index) => [`${name}.${index}`, checked(path, `${name}.${index}`)]);
  return {
    policy,
    limits,
    executable: realpathSync(found),
    args: [...args],
    cwd,
    writableDirectory,
    writableField: writableDirectory === undefined ? undefined : writableField,
    readOnlyPaths: [
      ...fields(options.readOnlyPaths ?? [], 'readOnlyPaths'),
      ...fields(policy.readOnlyPaths, 'policy.readOnlyPaths'),
    ],
    writablePaths: fields(policy.writablePaths, 'policy.writablePaths'),
    unixSockets: fields(policy.allowUnixSockets, 'policy.allowUnixSockets'),
    hiddenPaths,
    extraPipes: options.extraPipes ?? 0,
    hostPath: process.env.PATH,
    env,
  };
}

function realOrNothing(path: string): string[] {
  try {
    return [realpathSync(path)];
  } catch {
    return [];
  }
}

/** The limits of one run: the policy's, with the call's overrides applied. */
export function runLimits(policy: SubprocessPolicy, options: SpawnOptions): RunLimits {
  const timeoutMs = options.timeoutMs ?? policy.timeoutMs;
  const overrides = Object.entries(options.rlimits ?? {}).filter(
    ([, value]) => value !== undefined,
  );
  const rlimits: SubprocessPolicy['rlimits'] = {
    ...policy.rlimits,
    ...Object.fromEntries(overrides),
  };
  const derivedCpu =
    rlimits.cpuSecs > 0 ? rlimits.cpuSecs : timeoutMs > 0 ? Math.ceil(timeoutMs / 1000) : 0;
  return {
    timeoutMs,
    maxMemoryMb: options.maxMemoryMb ?? policy.maxMemoryMb,
    cpuSecs: options.cpuSecs ?? derivedCpu,
    rlimits,
    memoryFallback: options.memoryFallback ?? 'rlimit-data',
  };
}

/** Listens for a stream's error so that it is not uncaught; see where it is attached. */
function ignoreStreamError(): void {}

/** After every process of the run is gone: the set-id sweep of its writable directories. */
export function sweepAfterRun(plan: LaunchPlan): SetIdSweep | undefined {
  const dirs = plan.writableDirs ?? [];
  return dirs.length === 0 ? undefined : sweepSetIdFiles(dirs);
}

/** The same off the host's thread (run and spawn): a filled directory does not stall the host. */
export async function sweepAfterRunAsync(plan: LaunchPlan): Promise<SetIdSweep | undefined> {
  const dirs = plan.writableDirs ?? [];
  return dirs.length === 0 ? undefined : await sweepSetIdFilesAsync(dirs);
}

/** Frees what a plan holds when it will not run. */
export function releasePlan(plan: LaunchPlan): void {
  plan.release?.();
  if (plan.launcher === undefined) {
    plan.cgroups?.removeSync();
    return;
  }
  // The launcher sits in the groups until it is reaped: they go once it has left.
  plan.launcher.discard();
}

/** Writes the plan's inputs to the descriptors after the extra pipes, each then closed. */
function deliverInputs(child: ChildProcess, plan: LaunchPlan, extraPipes: number): void {
  plan.inputs?.forEach((data, index) => {
    const stream = child.stdio[3 + extraPipes + index] as Writable | null;
    stream?.on('error', () => {}); // a wrapper that died early fails the run through its exit
    if (data instanceof Uint8Array) stream?.end(data);
    else
      data.then(
        (bytes) => stream?.end(bytes),
        () => stream?.end(),
      );
  });
}

function start(
  plan: LaunchPlan,
  request: LaunchRequest,
  signal: AbortSignal | undefined,
  platform: Platform,
): SandboxedProcess {
  const startedAt = performance.now();
  const inputCount = plan.inputs?.length ?? 0;
  const stdio = Array.from(
    { length: 3 + request.extraPipes + inputCount + (plan.startMarker === true ? 1 : 0) },
    () => 'pipe' as const,
  );
  let child: ChildProcess;
  if (plan.launcher !== undefined) {
    // Already started and inside the run's cgroups: its instructions make it the command.
    child = plan.launcher.child;
    plan.launcher.ref();
  } else {
    // node:child_process rather than execa here: execa's option handling cost about 3 ms per
    // spawn (p50, measured), and this module does its own timeout, kill and output capping.
    child = spawn(plan.file, plan.args, {
      cwd: plan.cwd,
      env: plan.env,
      stdio: stdio as StdioOptions,
      detached: plan.detached,
      windowsHide: true,
    });
  }
  trackUntilExit(child, plan.detached);
  let started: Promise<boolean> | undefined;
  if (plan.prestarted !== undefined) {
    // Already confined and waiting: the command, its environment and cwd go down its pipe.
    plan.prestarted.sandbox.send(plan.prestarted.message);
    started = plan.prestarted.sandbox.started;
  } else {
    deliverInputs(child, plan, request.extraPipes);
    started =
      plan.startMarker === true ? startByte(child, 3 + request.extraPipes + inputCount) : undefined;
  }

  let timedOut = false;
  let cancelled = false;
  // Once the exit is handled the pid may belong to someone else: never signal it again.
  let finished = false;
  let killing: Promise<void> | undefined;
  const killAll = (): Promise<void> => {
    if (finished) return Promise.resolve();
    killing ??= (async () => {
      signalTree(child.pid, plan.detached, () => child.kill('SIGKILL'));
      await plan.cgroups?.kill();
    })();
    return killing;
  };
  const timer =
    request.limits.timeoutMs > 0
      ? setTimeout(() => {
          timedOut = true;
          void killAll();
        }, request.limits.timeoutMs)
      : undefined;
  const onAbort = (): void => {
    cancelled = true;
    void killAll();
  };
  if (signal?.aborted) onAbort();
  else signal?.addEventListener('abort', onAbort, { once: true });

  const exited = new Promise<ProcessExit>((resolve) => {
    let spawnError: string | undefined;
    child.once('error', (error) => {
      spawnError = error.message;
    });
    const finish = async (exitCode: number | null, exitSignal: string | null): Promise<void> => {
      if (finished) return;
      finished = true;
      const durationMs = performance.now() - startedAt;
      if (timer !== undefined) clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      // Whatever the command left behind (daemons, double forks) goes with it.
      if (plan.detached) signalTree(child.pid, true, () => {});
      await plan.cgroups?.kill();
      const memoryExceeded = plan.cgroups?.memoryExceeded() ?? false;
      const setIdSweep = await sweepAfterRunAsync(plan);
      // A run ended by its limits (time, memory) or the caller keeps that reason, even before
      // the command started.
      const setupFailed =
        started !== undefined &&
        !timedOut &&
        !cancelled &&
        !memoryExceeded &&
        spawnError === undefined &&
        !(await started);
      // Removal waits for killed processes to leave the groups; the caller need not.
      void plan.cgroups?.remove();
      plan.release?.();
      const exit: ProcessExit = {
        exitCode,
        signal: exitSignal,
        timedOut,
        cancelled,
        memoryExceeded,
        durationMs,
        ...(spawnError === undefined ? {} : { error: spawnError }),
        ...(setupFailed ? { setupFailed } : {}),
        ...(setIdSweep === undefined ? {} : { setIdSweep }),
      };
      resolve(exit);
      if (plan.afterExit !== undefined) setImmediate(plan.afterExit);
    };
    child.once('exit', (code, exitSignal) => void finish(code, exitSignal));
    // A spawn failure (no pid) emits 'error' and never 'exit'.
    if (child.pid === undefined) child.once('error', () => void finish(null, null));
  });

  const pipes = Array.from(
    { length: request.extraPipes },
    (_, index) => child.stdio[3 + index] as unknown as Duplex,
  );
  // A command may close its stdin or a pipe and exit while the host still writes to it: the
  // write fails with EPIPE, and an 'error' nobody listens for ends the host process, every
  // other run with it (attack review, stop 36: spawn's documented `stdin.end(payload)` did).
  // The command's exit says what happened; a caller's own listener still sees the error.
  for (const stream of [child.stdin, ...pipes]) stream?.on('error', ignoreStreamError);
  return {
    pid: child.pid,
    stdin: child.stdin!,
    stdout: child.stdout!,
    stderr: child.stderr!,
    pipes,
    controls: Object.freeze([...plan.controls]),
    sandboxApplied: plan.sandboxApplied,
    confinement: plan.confinement,
    platform,
    exited,
    kill: () => {
      if (finished) return;
      cancelled = true;
      void killAll();
    },
  };
}

/**
 * Whether the start byte arrived on descriptor `index`: settles at its end (every holder closed
 * it: the command's last step, or bubblewrap at its exit), or after the exit plus a bound.
 */
function startByte(child: ChildProcess, index: number): Promise<boolean> {
  const stream = child.stdio[index] as Duplex | null;
  if (stream === null || stream === undefined) return Promise.resolve(false);
  return new Promise((resolve) => {
    let seen = false;
    const done = (): void => resolve(seen);
    stream.on('data', () => {
      seen = true;
    });
    stream.once('end', done);
    stream.once('close', done);
    stream.once('error', done);
    child.once('exit', () => setTimeout(done, 1_000).unref());
  });
}

const live = new Map<ChildProcess, boolean>();
let exitHookInstalled = false;

/** Kills still-running commands when the host exits, as execa's `cleanup` would. */
function trackUntilExit(child: ChildProcess, group: boolean): void {
  if (!exitHookInstalled) {
    exitHookInstalled = true;
    process.once('exit', killLive);
  }
  live.set(child, group);
  child.once('exit', () => live.delete(child));
  child.once('error', () => live.delete(child));
}

function killLive(): void {
  for (const [child, group] of live) signalTree(child.pid, group, () => child.kill('SIGKILL'));
  live.clear();
}

/** SIGKILL to the process group when the command leads one, else to the process. */
function signalTree(pid: number | undefined, group: boolean, fallback: () => void): void {
  if (pid === undefined) return;
  try {
    if (group) process.kill(-pid, 'SIGKILL');
    else fallback();
  } catch {
    // Already gone.
  }
}
