// SubprocessSandbox: runs commands under the policy, on the platform's confinement.
import { spawnSync } from 'node:child_process';
import { closeSync } from 'node:fs';
import {
  isSandboxError,
  type Logger,
  SandboxUnavailableError,
  silentLogger,
  validate,
} from '@coda/sandbox-core';
import { parseCommandString } from 'execa';
import { z } from 'zod';
import { EgressProxy } from './egress/egress-proxy.ts';
import type { EgressLookup } from './egress/lookup.ts';
import { prestartPoolOf } from './linux/prestart-pool.ts';
import { detectCapabilities, type SandboxCapabilities } from './platform/capabilities.ts';
import { currentPlatform, type Platform } from './platform/platform.ts';
import {
  resolveSubprocessPolicy,
  type SubprocessPolicy,
  type SubprocessPolicyInput,
} from './policy/subprocess-policy.ts';
import { collectOutput } from './process/collect-output.ts';
import { SandboxControl } from './process/controls.ts';
import { RunEgress } from './process/run-egress.ts';
import {
  notStartedResult,
  type ResultBase,
  type ResultLimits,
  type SandboxResult,
  toResult,
} from './process/sandbox-result.ts';
import type { SandboxedProcess } from './process/sandboxed-process.ts';
import {
  prepareLaunch,
  runLimits,
  type SpawnContext,
  spawnConfined,
  sweepAfterRun,
} from './process/spawn-confined.ts';
import { type RunOptions, RunOptionsSchema, type SpawnOptions } from './process/spawn-options.ts';
import { unlinkedFile } from './process/unlinked-file.ts';

/** Options of the {@link SubprocessSandbox} constructor besides the policy. */
export interface SubprocessSandboxOptions {
  /** Where warnings (degraded confinement) go; nothing is logged by default. */
  logger?: Logger;
  /**
   * How the egress proxy resolves names (policies with `network`); default the system resolver.
   * Every address it returns is checked against the policy on every connection.
   */
  lookup?: EgressLookup | undefined;
  /**
   * How a run's forwarder gets its connections to the egress proxy (Linux, bubblewrap, a policy
   * with `network`): `pass` (default) sends each client socket to the host, whose splice relay
   * then moves a tunnel's bulk straight between it and the server; `relay` carries each one
   * over a Unix connection of its own (a second relay inside the sandbox). For comparisons and
   * diagnosis; checks, counts and the byte cap are the same either way.
   */
  egressForwarding?: 'pass' | 'relay' | undefined;
}

/** {@link SubprocessSandboxOptions.egressForwarding}, validated. */
const EgressForwardingSchema = z.enum(['pass', 'relay']).optional();

const closedMessage = 'The sandbox is closed';

/** The warning logged once when OS confinement is not available and only limits apply. */
export const degradedWarning = '[Sandbox] seccomp not available, using resource limits only';

/** The warning logged when a policy allows calls the default seccomp allowlist refuses. */
export const extraSyscallsWarning =
  '[Sandbox] extraSyscalls widens the seccomp allowlist past its default';

/**
 * Runs commands under a {@link SubprocessPolicy}: on Linux in bubblewrap with a generated seccomp
 * filter, rlimits and a cgroup; on macOS under Seatbelt and ulimits; on Windows in a Job Object.
 * A failing command is a result, never a throw; invalid options throw `SandboxValidationError`.
 */
export class SubprocessSandbox {
  #policy: SubprocessPolicy;
  readonly #logger: Logger;
  readonly #platform: Platform;
  #warned = false;
  /** Commands started and not yet exited, for {@link close}. */
  readonly #running = new Set<SandboxedProcess>();
  #closed = false;
  readonly #lookup: EgressLookup | undefined;
  readonly #egressForwarding: 'pass' | 'relay' | undefined;
  /** The egress proxy, started by the first command whose policy has `network`. */
  #proxy: EgressProxy | undefined;
  /** The listener and report of each command started under a network allowlist. */
  readonly #egress = new WeakMap<SandboxedProcess, RunEgress>();
  /**
   * Sandboxes pre-started for this sandbox's policy (Linux, bubblewrap): each serves one run
   * whose confinement matches it exactly; ended by {@link close} and by a policy change.
   */
  readonly #prestart = prestartPoolOf(this);

  constructor(policy?: SubprocessPolicyInput, options: SubprocessSandboxOptions = {}) {
    this.#logger = options.logger ?? silentLogger;
    this.#policy = this.#take(resolveSubprocessPolicy(policy));
    this.#platform = currentPlatform();
    this.#lookup = options.lookup;
    this.#egressForwarding = validate(
      EgressForwardingSchema,
      options.egressForwarding,
      'egressForwarding',
    );
  }

  /** Logs a policy's widening of the seccomp allowlist (a loosening), then returns the policy. */
  #take(policy: SubprocessPolicy): SubprocessPolicy {
    if (policy.extraSyscalls.length > 0) {
      this.#logger.warn({ extraSyscalls: policy.extraSyscalls }, extraSyscallsWarning);
    }
    return policy;
  }

  /**
   * Starts `file` with `args` (no shell) and returns its streams at once. The contract the parser
   * host builds on: see {@link SandboxedProcess}. Throws `SandboxValidationError` for bad options,
   * `SandboxUnavailableError` for a missing program, a strict policy that cannot be met or a
   * closed sandbox.
   */
  spawn(file: string, args: readonly string[] = [], options?: SpawnOptions): SandboxedProcess {
    if (this.#closed) throw new SandboxUnavailableError(closedMessage);
    const network = this.#policy.network;
    // One listener per command, so every connection is the command's own in its report.
    const egress = network === undefined ? undefined : new RunEgress(this.#egressProxy(), network);
    let child: SandboxedProcess;
    try {
      child = spawnConfined(this.#context(egress), file, args, options);
    } catch (error) {
      void egress?.close();
      throw error;
    }
    if (egress !== undefined) {
      child = { ...child, network: egress.activity };
      this.#egress.set(child, egress);
      void child.exited.then(() => egress.close());
    }
    this.#running.add(child);
    void child.exited.then(() => this.#running.delete(child));
    return child;
  }

  /** Runs `file` with `args` (no shell) and collects its output up to `maxOutputBytes` per stream. */
  async run(
    file: string,
    args: readonly string[] = [],
    options?: RunOptions,
  ): Promise<SandboxResult> {
    const { input, maxOutputBytes, ...spawnOptions } = validate(
      RunOptionsSchema,
      options ?? {},
      'run options',
    );
    let child: SandboxedProcess;
    try {
      child = this.spawn(file, args, spawnOptions);
    } catch (error) {
      if (isSandboxError(error) && error instanceof SandboxUnavailableError) {
        return notStartedResult(this.#notStartedBase(), error.message);
      }
      throw error;
    }
    const cap = maxOutputBytes ?? this.#policy.maxOutputBytes;
    const stdout = collectOutput(child.stdout, cap);
    const stderr = collectOutput(child.stderr, cap);
    child.stdin.on('error', () => {}); // a command that exits without reading its input is fine
    child.stdin.end(input);
    const exit = await child.exited;
    // After the exit every process of the run is gone, so the pipes end; the bound covers a
    // process that escaped (fallback without cgroups) and still holds them.
    const grace = setTimeout(() => {
      stdout.settle();
      stderr.settle();
    }, 500);
    const [out, err] = await Promise.all([stdout.done, stderr.done]);
    clearTimeout(grace);
    const egress = this.#egress.get(child);
    await egress?.close();
    const result = toResult(
      {
        sandboxApplied: child.sandboxApplied,
        confinement: child.confinement,
        platform: child.platform,
        controls: [...child.controls, SandboxControl.outputCap],
      },
      exit,
      {
        stdout: out.text,
        stderr: err.text,
        stdoutTruncated: out.truncated,
        stderrTruncated: err.truncated,
      },
      this.#limits(spawnOptions),
    );
    return egress === undefined ? result : { ...result, network: egress.report() };
  }

  /**
   * Splits `command` into a program and arguments with execa's parser, without a shell: `;`,
   * `$( )`, backticks and `&&` reach the program as plain text. Then as {@link run}.
   */
  async exec(command: string, options?: RunOptions): Promise<SandboxResult> {
    const [file = '', ...args] = parseCommand(command);
    return this.run(file, args, options);
  }

  /**
   * The synchronous form of {@link exec}. Blocks the event loop for the whole run; prefer
   * {@link run}. Output beyond `maxOutputBytes` ends the command (Node's `maxBuffer`).
   */
  execSync(command: string, options?: Omit<RunOptions, 'signal'>): SandboxResult {
    const { input, maxOutputBytes, ...spawnOptions } = validate(
      RunOptionsSchema.omit({ signal: true }),
      options ?? {},
      'execSync options',
    );
    const [file = '', ...args] = parseCommand(command);
    if (this.#closed) return notStartedResult(this.#notStartedBase(), closedMessage);
    if (this.#policy.network !== undefined) {
      // spawnSync blocks the event loop the proxy answers on: the command could not connect.
      return notStartedResult(
        this.#notStartedBase(),
        'A network allowlist needs run, exec or spawn: execSync blocks the event loop the egress proxy runs on',
      );
    }
    let prepared: ReturnType<typeof prepareLaunch>;
    try {
      prepared = prepareLaunch(this.#context(), file, args, spawnOptions, true);
    } catch (error) {
      if (error instanceof SandboxUnavailableError)
        return notStartedResult(this.#notStartedBase(), error.message);
      throw error;
    }
    const { plan, request } = prepared;
    const cap = maxOutputBytes ?? this.#policy.maxOutputBytes;
    const startedAt = performance.now();
    let result: ReturnType<typeof spawnSync>;
    // spawnSync cannot write to a child's pipes while it runs: inputs go in as unlinked files.
    const inputFds: number[] = [];
    try {
      for (const data of plan.inputs ?? []) {
        // Only a network allowlist's plan waits for a proxy port; execSync refused it above.
        if (!(data instanceof Uint8Array)) throw new Error('execSync got a deferred input');
        inputFds.push(unlinkedFile(data));
      }
      result = spawnSync(plan.file, plan.args, {
        cwd: plan.cwd,
        env: plan.env,
        input: input ?? '',
        stdio: [
          'pipe',
          'pipe',
          'pipe',
          ...inputFds,
          ...(plan.startMarker === true ? ['pipe' as const] : []),
        ],
        maxBuffer: cap,
        killSignal: 'SIGKILL',
        windowsHide: true,
        ...(request.limits.timeoutMs > 0 ? { timeout: request.limits.timeoutMs } : {}),
      });
    } finally {
      for (const fd of inputFds) closeSync(fd);
      plan.release?.();
    }
    const durationMs = performance.now() - startedAt;
    plan.cgroups?.killSync();
    const memoryExceeded = plan.cgroups?.memoryExceeded() ?? false;
    void plan.cgroups?.remove();
    const setIdSweep = sweepAfterRun(plan);
    const errorCode = (result.error as NodeJS.ErrnoException | undefined)?.code;
    const timedOut = errorCode === 'ETIMEDOUT';
    const overflow = errorCode === 'ENOBUFS';
    const stdout = toText(result.stdout);
    const stderr = toText(result.stderr);
    const startBytes = result.output?.[3 + request.extraPipes + inputFds.length];
    const setupFailed =
      plan.startMarker === true &&
      !timedOut &&
      !overflow &&
      !memoryExceeded &&
      (startBytes?.length ?? 0) === 0;
    return toResult(
      {
        sandboxApplied: plan.sandboxApplied,
        confinement: plan.confinement,
        platform: prepared.platform,
        controls: [...plan.controls, SandboxControl.outputCap],
      },
      {
        exitCode: result.status,
        signal: result.signal,
        timedOut,
        cancelled: false,
        memoryExceeded,
        durationMs,
        ...(setupFailed ? { setupFailed } : {}),
        ...(setIdSweep === undefined ? {} : { setIdSweep }),
        ...(result.error !== undefined && !timedOut
          ? overflow
            ? {
                error: `Output exceeded ${cap} bytes; the command was killed`,
                failureCode: 'LIMIT_EXCEEDED' as const,
              }
            : { error: result.error.message }
          : {}),
      },
      {
        stdout: stdout.slice(0, cap),
        stderr: stderr.slice(0, cap),
        stdoutTruncated: overflow && Buffer.byteLength(stdout) >= cap,
        stderrTruncated: overflow && Buffer.byteLength(stderr) >= cap,
      },
      this.#limits(spawnOptions),
    );
  }

  /**
   * Replaces the fields given; validated first, so a bad update changes nothing. Optional
   * fields (`restrictToDirectory`, `allowedSyscalls`) cannot be removed this way: use
   * {@link replacePolicy}.
   */
  updatePolicy(policy: SubprocessPolicyInput): void {
    this.#policy = this.#take(resolveSubprocessPolicy(policy, this.#policy));
    this.#prestart.clear();
  }

  /** Replaces the whole policy: fields not given take their defaults (used by the config watcher). */
  replacePolicy(policy: SubprocessPolicyInput): void {
    this.#policy = this.#take(resolveSubprocessPolicy(policy));
    this.#prestart.clear();
  }

  /** A copy of the current policy. */
  getPolicy(): SubprocessPolicy {
    return structuredClone(this.#policy);
  }

  /** The platform this sandbox confines for. */
  getPlatform(): Platform {
    return this.#platform;
  }

  /**
   * What runs under the current policy can enforce on this host, without running a command:
   * for example whether `maxMemoryMb` becomes a memory cgroup or RLIMIT_DATA (which stops Node
   * from starting under about 1 GiB). Detection runs once per process (the first call may
   * take a few ms to probe bubblewrap); later calls are cheap.
   */
  capabilities(): SandboxCapabilities {
    return detectCapabilities(this.#platform, this.#policy);
  }

  /**
   * Refuses further commands (`spawn` throws `SandboxUnavailableError`, `run`, `exec` and
   * `execSync` return an `UNAVAILABLE` result), kills every command this sandbox started that
   * is still running, and resolves once all of them are gone. Never rejects; safe to call twice.
   */
  async close(): Promise<void> {
    this.#closed = true;
    const running = [...this.#running];
    for (const child of running) child.kill();
    await Promise.all([...running.map((child) => child.exited), this.#prestart.close()]);
    await this.#proxy?.close();
  }

  /** {@link close}, for `await using sandbox = createSandbox(...)`. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }

  /** The sandbox's egress proxy, started on first use. */
  #egressProxy(): EgressProxy {
    this.#proxy ??= new EgressProxy({
      lookup: this.#lookup,
      passConnections: this.#egressForwarding !== 'relay',
    });
    return this.#proxy;
  }

  #context(egress?: RunEgress): SpawnContext {
    return {
      policy: this.#policy,
      egress,
      prestart: this.#prestart,
      platform: this.#platform,
      onDegraded: (reason) => {
        if (this.#warned) return;
        this.#warned = true;
        this.#logger.warn({ reason }, degradedWarning);
      },
    };
  }

  #limits(options: SpawnOptions): ResultLimits {
    return runLimits(this.#policy, options);
  }

  #notStartedBase(): ResultBase {
    return { sandboxApplied: false, confinement: 'none', platform: this.#platform, controls: [] };
  }
}

function parseCommand(command: string): string[] {
  validate(z.string().trim().min(1, 'expected a command'), command, 'command');
  return parseCommandString(command);
}

function toText(value: string | Buffer | null | undefined): string {
  if (value === null || value === undefined) return '';
  return typeof value === 'string' ? value : value.toString('utf8');
}

/** Creates a {@link SubprocessSandbox}. */
export function createSandbox(
  policy?: SubprocessPolicyInput,
  options?: SubprocessSandboxOptions,
): SubprocessSandbox {
  return new SubprocessSandbox(policy, options);
}
