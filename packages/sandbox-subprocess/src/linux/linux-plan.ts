// Turns a policy and one command into what confines it on Linux. Every run starts as the wrapper
// shell (wrapper-shell.ts: empty environment, inherited descriptors closed, cgroups joined),
// which reads its instructions from a pipe: rlimits, then `exec bwrap --args FD`. bubblewrap's
// arguments (the declared view, namespaces, the command and its environment) follow on the same
// pipe, so none of them is on a host command line. Inside, a root host's command drops to an
// unprivileged identity before anything of the caller's runs. Where bubblewrap cannot run, the
// probe's next backend (backend-choice.ts) takes its place: the Landlock applier
// (landlock/landlock-plan.ts), on the same pipe, or, only when the policy accepts it, the wrapper
// running the command directly: rlimits, cgroups, a process group, and no isolation.
import { SandboxUnavailableError } from '@coda/sandbox-core';
import { proxyEnvironment, withForwarder } from '../egress/forwarder.ts';
import { SandboxControl, writesControl } from '../process/controls.ts';
import type { LaunchPlan, LaunchRequest } from '../process/launch-plan.ts';
import { shellQuote } from '../process/shell-quote.ts';
import { ulimitSteps } from '../process/ulimit.ts';
import { chooseBackend, refuseBelowMinimum } from './backend-choice.ts';
import { type CgroupSupport, createRunCgroups, detectCgroups, type RunCgroups } from './cgroup.ts';
import { type CheckedPath, pathError, releasePins } from './checked-path.ts';
import { bashPath, perlPath, setprivPath } from './detect.ts';
import {
  envExpandsSplitStrings,
  envPath,
  envRunnable,
  exactEnvironmentExec,
} from './exact-environment.ts';
import {
  defaultFilesystemView,
  type HostPaths,
  sandboxHome,
  viewArguments,
} from './filesystem-view.ts';
import { hostPaths } from './host-paths.ts';
import { umaskStep } from './host-umask.ts';
import { truncateAbi } from './landlock/landlock-abi.ts';
import { landlockArguments } from './landlock/landlock-plan.ts';
import { type Launcher, type LauncherShape, takeLauncher } from './launcher-pool.ts';
import { maskStamp } from './mask-stamp.ts';
import type { PrestartedSandbox, PrestartPool, PrestartSpec } from './prestart-pool.ts';
import { commandMessage, stubScript, stubVariablePrefix } from './prestart-stub.ts';
import { runAdditions } from './run-paths.ts';
import { seccompProgram } from './seccomp/program-cache.ts';
import {
  commandDescriptor,
  instructionsDescriptor,
  seccompDescriptor,
  startedDescriptor,
  startedSteps,
  wrapperScript,
} from './wrapper-shell.ts';

const mib = 1024 * 1024;
/** nobody:nogroup on Debian, Ubuntu, Fedora and Alpine. */
export const defaultIdentity = Object.freeze({ uid: 65534, gid: 65534 });

/** Who the command runs as. */
export type Identity =
  /** The host is root: drop to this uid/gid inside the sandbox (bwrap itself stays root). */
  | { readonly kind: 'drop'; readonly uid: number; readonly gid: number }
  /** The host is root and the policy asked for its identity (`runAs: 'host'`). */
  | { readonly kind: 'host' }
  /** The host is not root: the command runs as the host's own unprivileged user. */
  | { readonly kind: 'own' };

/** The identity a run under `policy` gets on this host. */
export function runIdentity(policy: Pick<LaunchRequest['policy'], 'runAs'>): Identity {
  if (process.getuid?.() !== 0) return { kind: 'own' };
  if (policy.runAs === 'host') return { kind: 'host' };
  return { kind: 'drop', ...(policy.runAs ?? defaultIdentity) };
}

/** Builds the Linux launch plan. */
export function linuxPlan(planned: LaunchRequest): LaunchPlan {
  let request = planned;
  const { policy, limits } = request;
  if (!policy.enabled) return unconfinedPlan(request);
  if (bashPath === undefined) {
    throw new SandboxUnavailableError(
      'The sandbox needs bash (in /usr/bin or /bin) for its host-side wrapper',
      { details: { reason: 'bash not found' } },
    );
  }
  const choice = chooseBackend(policy, request.hostPath);
  refuseBelowMinimum(choice, policy);
  const { backend, identity, bwrap: support } = choice;
  const useBwrap = backend === 'bubblewrap' || backend === 'bubblewrap-as-caller';
  if (useBwrap && !envExpandsSplitStrings()) {
    throw new SandboxUnavailableError(
      'The sandbox needs GNU env (coreutils 8.30 or later, in /usr/bin or /bin, with -S) to set the command’s environment',
      { details: { reason: envPath === undefined ? 'env not found' : 'env without -S' } },
    );
  }
  const landlockAbi = backend === 'landlock' ? choice.landlockAbi : undefined;
  const confined = useBwrap || landlockAbi !== undefined;
  // A network allowlist: bubblewrap binds the proxy's Unix socket into the run's own network
  // namespace; Landlock (ABI 4, checked with its rules) lets TCP reach the proxy's port only.
  const egress = request.egress;
  if (egress !== undefined && landlockAbi === undefined) {
    requireEgressSupport(support, useBwrap, backend);
  }
  if (confined && identity.kind === 'drop' && setprivPath === undefined) {
    throw new SandboxUnavailableError(
      'Dropping to an unprivileged identity needs util-linux setpriv (or runAs: "host")',
      { details: { reason: 'setpriv not found' } },
    );
  }
  const controls: SandboxControl[] = [SandboxControl.cleanEnvironment, SandboxControl.cleanHelpers];
  const wanted = { memoryBytes: limits.maxMemoryMb * mib, pids: limits.rlimits.processes };
  const cgroupSupport = detectCgroups();
  const shape: LauncherShape = {
    memory: wanted.memoryBytes > 0 && cgroupSupport?.memory !== undefined,
    pids: wanted.pids > 0 && cgroupSupport?.pids !== undefined,
    extraPipes: request.extraPipes,
    detached: !useBwrap,
  };
  if (limits.maxMemoryMb > 0 && !shape.memory && limits.memoryFallback === 'refuse') {
    throw new SandboxUnavailableError(
      'No writable memory cgroup on this host and memoryFallback is "refuse"',
      { details: { reason: 'no memory cgroup' } },
    );
  }

  // Everything that can refuse the run comes before anything is taken (cgroups, launchers).
  const pins: CheckedPath[] = [];
  let instructions: string | Promise<string>;
  /** The run as a pre-started sandbox would run it, when one could (see prestartable). */
  let prestart: { steps: string; options: Buffer; message: Buffer } | undefined;
  try {
    let ulimits: string[] | undefined; // built (and its controls listed) on first use
    const hasPidsCgroup = shape.pids;
    const dataFallback = !shape.memory && limits.memoryFallback === 'rlimit-data';
    const needsNproc = !hasPidsCgroup && identity.kind !== 'drop' && process.getuid?.() !== 0;
    const choices = {
      data: dataFallback,
      nprocFlag: needsNproc ? ('-u' as const) : undefined,
      fileBlockBytes: 1024 as const,
    };
    // The host's umask now, not the one a pooled wrapper inherited when it was spawned.
    const umask = umaskStep();
    const line = (exec: string): string => {
      if (ulimits === undefined) {
        ulimits = ulimitSteps(limits, choices, controls);
        if (dataFallback && limits.maxMemoryMb > 0) controls.push(SandboxControl.memoryRlimitData);
        if (umask !== undefined) ulimits.push(umask);
      }
      return [...ulimits, exec].join(' && ');
    };
    // A pre-started sandbox's wrapper: the same steps without RLIMIT_CPU, which varies with
    // every per-call timeoutMs or cpuSecs (it kept every such run cold, and the pool refilled a
    // sandbox for a key no later run had). The stub sets the run's own value (prestart-stub.ts).
    const warmLine = (exec: string): string =>
      [
        ...ulimitSteps({ ...limits, cpuSecs: 0 }, choices, []),
        ...(umask === undefined ? [] : [umask]),
        exec,
      ].join(' && ');
    // bwrap takes its options from the pipe; the command must follow on its own argv.
    const bwrapExec = (command: readonly string[]): string =>
      `exec ${[support.bwrap!, '--args', String(instructionsDescriptor(request)), '--', ...command].map(shellQuote).join(' ')}`;
    const nulSeparated = (args: readonly string[]): string =>
      args.map((arg) => `${arg}\0`).join('');
    if (useBwrap) {
      if (egress !== undefined) request = { ...request, egressSocket: egress.unixSocket() };
      const confinement = bwrapConfinement(
        request,
        identity,
        controls,
        support.networkNamespace,
        pins,
      );
      const bwrap = coldBwrapArguments(confinement, request);
      instructions = `${line(bwrapExec(bwrap.command))}\0${nulSeparated(bwrap.options)}`;
      if (prestartable(request, confinement, pins)) {
        const cpuSecs = limits.cpuSecs > 0 ? limits.cpuSecs : undefined;
        const warm = prestartBwrapArguments(confinement, request, cpuSecs !== undefined);
        prestart = {
          steps: warmLine(bwrapExec(warm.command)),
          options: Buffer.from(nulSeparated(warm.options)),
          message: commandMessage(cpuSecs, confinement.cwd, confinement.env, confinement.command),
        };
      }
    } else if (landlockAbi !== undefined) {
      const landlock = landlockArguments(
        request,
        identity,
        landlockAbi,
        controls,
        pins,
        hostPaths,
        egress !== undefined,
      );
      const prefix = `${line(`exec ${landlock.exec.map(shellQuote).join(' ')}`)}\0`;
      // The proxy's port is known once its listener is up; the wrapper waits on its pipe.
      instructions =
        egress === undefined
          ? `${prefix}${landlock.encode()}`
          : egress.loopbackPort().then((port) => `${prefix}${landlock.encode(port)}`);
    } else {
      // The wrapper closed what the host left open (wrapper-shell.ts), here as everywhere.
      controls.push(SandboxControl.inheritedDescriptorsClosed);
      instructions = `${line(fallbackExec(request, identity, controls))}\0`;
    }
  } catch (error) {
    releasePins(pins);
    throw error;
  }

  // With an egress allowlist under bubblewrap, inet sockets work inside (only loopback exists
  // in the run's namespace) and the forwarder connects to the proxy's Unix socket; under
  // Landlock, TCP client sockets only.
  const proxied = egress !== undefined;
  const seccomp = confined
    ? seccompProgram({
        allowNetwork: policy.allowNetwork || proxied,
        allowedSyscalls: policy.allowedSyscalls,
        extraSyscalls: policy.extraSyscalls,
        allowUnixConnect: request.unixSockets.length > 0 || (proxied && useBwrap),
        refuseTruncateByName: landlockAbi !== undefined && landlockAbi < truncateAbi,
        tcpClientOnly: proxied && landlockAbi !== undefined,
      })
    : new Uint8Array(0);
  const pooled = cgroupSupport !== undefined && (shape.memory || shape.pids);
  const pool = pooled ? request.prestart : undefined;
  const key =
    pool !== undefined && prestart !== undefined
      ? prestartKey(shape, prestart, seccomp, maskStamp(request.hiddenPaths))
      : undefined;
  const warm =
    key !== undefined
      ? takePrestarted(
          pool!,
          key,
          {
            support: cgroupSupport!,
            groups: shape,
            layout: request,
            steps: prestart!.steps,
            inputs: [seccomp, prestart!.options],
          },
          wanted,
        )
      : undefined;
  const launcher =
    warm?.launcher ??
    (pooled && request.synchronous !== true
      ? takeReadyLauncher(cgroupSupport, shape, wanted)
      : undefined);
  const cgroups: RunCgroups | undefined =
    launcher?.cgroups ??
    (cgroupSupport === undefined ? undefined : createRunCgroups(cgroupSupport, wanted));
  if (cgroups !== undefined) controls.push(...cgroups.controls);
  if (limits.timeoutMs > 0) controls.push(SandboxControl.wallClockTimeout);
  controls.push(useBwrap ? SandboxControl.killPidNamespace : SandboxControl.killProcessGroup);

  let released = false;
  return {
    file: bashPath,
    args: [
      '--norc',
      '--noprofile',
      '-c',
      wrapperScript(request, cgroups?.procsFiles ?? []),
      'coda-sandbox',
    ],
    cwd: '/',
    env: {},
    controls,
    sandboxApplied: confined,
    confinement: backend,
    inputs: [
      seccomp,
      typeof instructions === 'string'
        ? Buffer.from(instructions)
        : instructions.then((text) => Buffer.from(text)),
    ],
    startMarker: true,
    writableDirs: [
      ...(request.writableDirectory === undefined ? [] : [request.writableDirectory]),
      ...request.writablePaths.map(([, path]) => path),
    ],
    release: () => {
      if (released) return;
      released = true;
      releasePins(pins);
    },
    cgroups,
    detached: !useBwrap,
    launcher,
    ...(warm === undefined ? {} : { prestarted: { sandbox: warm, message: prestart!.message } }),
    ...(key === undefined ? {} : { afterExit: () => pool!.refill(key) }),
    fallbackReason: confined ? undefined : choice.reasons.join('; '),
  };
}

/**
 * A run with a network allowlist reaches the network only through the proxy, or not at all:
 * outside the Landlock backend (which checks its own ABI, landlock-plan.ts) it needs bubblewrap
 * with a network namespace and perl (the forwarder).
 */
function requireEgressSupport(
  support: { readonly networkNamespace: boolean; readonly reason?: string | undefined },
  useBwrap: boolean,
  backend: string,
): void {
  const missing = !useBwrap
    ? `bubblewrap (the ${backend} backend was chosen${support.reason === undefined ? '' : `: ${support.reason}`})`
    : !support.networkNamespace
      ? 'a network namespace'
      : perlPath === undefined
        ? 'perl (/usr/bin/perl) for the forwarder'
        : undefined;
  if (missing === undefined) return;
  throw new SandboxUnavailableError(
    `A network allowlist needs ${missing}; the command did not run`,
    {
      details: { reason: `network policy needs ${missing}` },
    },
  );
}

/** The command as it is when the policy disables confinement: clean environment, nothing else. */
function unconfinedPlan(request: LaunchRequest): LaunchPlan {
  return {
    file: request.executable,
    args: request.args,
    cwd: request.cwd ?? process.cwd(),
    env: request.env,
    controls: [SandboxControl.cleanEnvironment, SandboxControl.killProcessGroup],
    sandboxApplied: false,
    confinement: 'none',
    cgroups: undefined,
    detached: true,
    fallbackReason: 'sandbox disabled by policy',
  };
}

/**
 * The fallback's last step, run by the wrapper itself: cwd, the command's environment (exported
 * only now, so no helper before it saw it), an explicit `runAs` through setpriv, then the command.
 */
function fallbackExec(
  request: LaunchRequest,
  identity: Identity,
  controls: SandboxControl[],
): string {
  const exports = Object.entries(request.env).map(
    ([name, value]) => `${name}=${shellQuote(value)}`,
  );
  const drop =
    identity.kind === 'drop' &&
    typeof request.policy.runAs === 'object' &&
    setprivPath !== undefined
      ? [setprivPath, `--reuid=${identity.uid}`, `--regid=${identity.gid}`, '--clear-groups', '--']
      : [];
  if (drop.length > 0) controls.push(SandboxControl.unprivilegedIdentity);
  return [
    `cd -- ${shellQuote(request.cwd ?? process.cwd())}`,
    'unset OLDPWD', // set by `cd`; not the command's
    ...(exports.length > 0 ? [`export ${exports.join(' ')}`] : []),
    startedSteps(startedDescriptor(request)),
    `exec ${[...drop, request.executable, ...request.args].map(shellQuote).join(' ')}`,
  ].join(' && ');
}

/** A pooled launcher with the run's limits written, or undefined (start cold). */
function takeReadyLauncher(
  support: CgroupSupport,
  shape: LauncherShape,
  limits: { memoryBytes: number; pids: number },
): Launcher | undefined {
  const launcher = takeLauncher(support, shape);
  if (launcher === undefined) return undefined;
  try {
    launcher.cgroups.setLimits(limits);
    return launcher;
  } catch {
    launcher.discard();
    return undefined;
  }
}

/**
 * A pre-started sandbox of `key` with the run's cgroup limits written, or undefined (start
 * cold); `spec` is what the pool pre-starts for `key` after the run.
 */
function takePrestarted(
  pool: PrestartPool,
  key: string,
  spec: PrestartSpec,
  limits: { memoryBytes: number; pids: number },
): PrestartedSandbox | undefined {
  const sandbox = pool.take(key, spec);
  if (sandbox === undefined) return undefined;
  try {
    sandbox.launcher.cgroups.setLimits(limits);
    return sandbox;
  } catch {
    sandbox.launcher.discard();
    return undefined;
  }
}

/**
 * What a pre-started sandbox must have been started with to serve the run: the groups it is in,
 * the wrapper's steps (rlimits, umask, bwrap), bwrap's options (view, namespaces, identity), the
 * seccomp program and the host objects its masks were mounted over (`masks`, mask-stamp.ts: a
 * host path replaced since the pre-start would be unmasked in it). Computed for every run, so
 * it reflects the host as the run finds it.
 */
function prestartKey(
  shape: LauncherShape,
  prestart: { steps: string; options: Buffer },
  seccomp: Uint8Array,
  masks: string,
): string {
  const groups = `${+shape.memory}${+shape.pids}:${shape.extraPipes}`;
  return [
    groups,
    prestart.steps,
    masks,
    prestart.options.toString(),
    Buffer.from(seccomp).toString('base64'),
  ].join('\0');
}

/**
 * Whether a pre-started sandbox can run `request` exactly as a cold run would: bubblewrap, no
 * path pinned for the run (a pinned descriptor is the run's own: binding an earlier one could
 * show a path since replaced), no egress forwarder (its socket is the run's), not a spawnSync,
 * no variable of the stub's reserved prefix (refused cold in a dropped identity), and an argv
 * and environment that exec surely takes (see {@link prestartExecBytes}). Variables bash treats
 * as its own (`UID`, `SHLVL`, `BASH_ENV`) no longer matter: env sets the command's environment,
 * warm and cold (exact-environment.ts).
 */
function prestartable(
  request: LaunchRequest,
  confinement: BwrapConfinement,
  pins: readonly CheckedPath[],
): boolean {
  return (
    request.prestart !== undefined &&
    request.synchronous !== true &&
    request.egressSocket === undefined &&
    pins.length === 0 &&
    !Object.keys(confinement.env).some((name) => name.startsWith(stubVariablePrefix)) &&
    execBytes(confinement) <= prestartExecBytes
  );
}

/**
 * The largest argv and environment (strings, their NULs and pointers) a pre-started sandbox
 * takes: half the 128 KiB the kernel accepts whatever the stack limit (fs/exec.c, ARG_MAX),
 * leaving room for what a cold run adds (the variables' prefix, setpriv's and the shell's own
 * arguments). Past the kernel's limit a cold run fails at its setup (`UNAVAILABLE`, the command
 * never started) while the stub, having written its start byte, would fail as the command (exit
 * 126, `RUNTIME`): an attack review found the two results differ. Such runs go cold.
 */
const prestartExecBytes = 64 * 1024;

function execBytes(confinement: BwrapConfinement): number {
  const strings = [
    ...confinement.command,
    ...Object.entries(confinement.env).map(([name, value]) => `${name}=${value}`),
  ];
  return strings.reduce((total, text) => total + Buffer.byteLength(text) + 1 + 8, 8 * 2);
}

/** The variable prefix that carries the command's environment past setpriv, inert to ld.so. */
const envPrefix = stubVariablePrefix;

/**
 * After setpriv (bash, already unprivileged): enters the cwd, writes the start byte to `fd`,
 * then becomes the command through env, which sets the prefixed variables unprefixed
 * (exact-environment.ts).
 */
const unprefixScript = (fd: number): string =>
  `cd -- "$1" || exit 126; shift; ${exactEnvironmentExec(startedSteps(fd))}`;
/** Without an identity to drop to: the start byte, then the command through env alike. */
const startScript = (fd: number): string => exactEnvironmentExec(startedSteps(fd));

/**
 * bubblewrap's options (namespaces, the view with the run's additions, each pinned in `pins`,
 * identity, environment, seccomp) and the command it runs, for a cold run. The options travel
 * on a pipe; the command is on bwrap's argv, like any command's own argv, but no environment
 * value is.
 */
export function bwrapArguments(
  request: LaunchRequest,
  identity: Identity,
  controls: SandboxControl[],
  networkNamespace: boolean,
  pins: CheckedPath[],
  host: HostPaths = hostPaths,
): { options: string[]; command: string[] } {
  return coldBwrapArguments(
    bwrapConfinement(request, identity, controls, networkNamespace, pins, host),
    request,
  );
}

/** A run's confinement under bubblewrap, before it is told how the command will get there. */
export interface BwrapConfinement {
  readonly identity: Identity;
  /** Namespaces, capabilities and the view (no cwd, environment or seccomp yet). */
  readonly options: readonly string[];
  /** The command's whole environment. */
  readonly env: Readonly<Record<string, string>>;
  /** Where the command starts. */
  readonly cwd: string;
  /** The program and its arguments (behind the egress forwarder when there is one). */
  readonly command: readonly string[];
}

/**
 * The parts of a run's bubblewrap invocation that a cold run and a pre-started sandbox share,
 * with the controls they enforce pushed to `controls`.
 */
export function bwrapConfinement(
  request: LaunchRequest,
  identity: Identity,
  controls: SandboxControl[],
  networkNamespace: boolean,
  pins: CheckedPath[],
  host: HostPaths = hostPaths,
): BwrapConfinement {
  const { policy, limits } = request;
  const args = [
    '--new-session',
    '--die-with-parent',
    '--unshare-pid',
    '--unshare-ipc',
    '--unshare-uts',
  ];
  controls.push(
    SandboxControl.bubblewrap,
    SandboxControl.pidNamespace,
    SandboxControl.ipcNamespace,
    SandboxControl.utsNamespace,
    SandboxControl.mountNamespace,
  );
  if (identity.kind === 'drop') {
    // bwrap stays root to build the view; setpriv, inside, needs only these three to drop.
    args.push('--cap-drop', 'ALL');
    for (const cap of ['CAP_SETUID', 'CAP_SETGID', 'CAP_SETPCAP']) args.push('--cap-add', cap);
    controls.push(SandboxControl.unprivilegedIdentity);
  } else {
    args.push('--unshare-user', '--disable-userns', '--cap-drop', 'ALL');
    controls.push(SandboxControl.userNamespace);
    controls.push(
      identity.kind === 'host' ? SandboxControl.hostIdentity : SandboxControl.unprivilegedIdentity,
    );
  }
  const egress = request.egressSocket;
  if ((!policy.allowNetwork || egress !== undefined) && networkNamespace) {
    args.push('--unshare-net');
    controls.push(SandboxControl.networkNamespace);
  }
  if (egress !== undefined) controls.push(SandboxControl.egressProxy);

  // bwrap in a user namespace of its own may not follow the host's /proc/PID/fd links (it lacks
  // the host's capabilities there): it binds the checked path by name instead.
  const additions = runAdditions(request, identity, pins, identity.kind === 'drop');

  const tmpfsBytes = limits.maxMemoryMb > 0 ? limits.maxMemoryMb * mib : 512 * mib;
  args.push(
    ...viewArguments(defaultFilesystemView, additions, policy.allowFileWrites, host, tmpfsBytes),
  );
  controls.push(SandboxControl.filesystemView, SandboxControl.privateTmp);
  if (request.hiddenPaths.length > 0) controls.push(SandboxControl.hiddenPaths);
  // From what the run can write: with allowFileWrites its private /tmp, home and /dev/shm are
  // writable even when no host directory is (an attack review found `no-file-writes` claimed
  // there, the same list as with writes refused).
  const writes = writesControl(additions.writable.length, policy.allowFileWrites);
  if (writes !== undefined) controls.push(writes);

  const cwd = request.cwd ?? sandboxHome;
  const env: Record<string, string> = {
    HOME: sandboxHome,
    // What a bash that exec'd the command always exported, kept (documented) now that env sets
    // the environment instead (exact-environment.ts); a caller's own SHLVL replaces it.
    SHLVL: '0',
    ...request.env,
    // Last, so no caller's variable points a program elsewhere (it would fail anyway).
    ...(egress === undefined ? {} : proxyEnvironment()),
    PWD: cwd,
  };
  let command = [request.executable, ...request.args];
  if (egress !== undefined) command = withForwarder(perlPath!, egress, command);
  command = [...envRunnable(command)]; // env, the last step, would read `a=b` as a variable
  controls.push(
    SandboxControl.newSession,
    SandboxControl.capabilitiesDropped,
    SandboxControl.noNewPrivileges,
    SandboxControl.seccomp,
    SandboxControl.inheritedDescriptorsClosed,
  );
  if (policy.allowedSyscalls !== undefined) controls.push(SandboxControl.seccompAllowlist);
  if (!policy.allowNetwork && egress === undefined) {
    controls.push(SandboxControl.seccompNoInet);
    if (request.unixSockets.length === 0) controls.push(SandboxControl.seccompNoUnixConnect);
  }
  return { identity, options: args, env, cwd, command };
}

/** A cold run's bubblewrap options and command, from its {@link bwrapConfinement}. */
export function coldBwrapArguments(
  confinement: BwrapConfinement,
  request: Pick<LaunchRequest, 'extraPipes'>,
): { options: string[]; command: string[] } {
  const { identity, env, cwd } = confinement;
  // Dropping to an identity, the cwd is entered after the drop (bwrap, without capabilities by
  // then, could not enter a directory only that identity may); else bwrap enters it.
  const args = [
    ...confinement.options,
    ...(identity.kind === 'drop' ? [] : ['--chdir', cwd]),
    '--clearenv',
  ];
  let command = [...confinement.command];
  if (identity.kind === 'drop') {
    const reserved = Object.keys(env).find((name) => name.startsWith(envPrefix));
    if (reserved !== undefined) {
      throw pathError(`env.${reserved}`, `names starting with ${envPrefix} are reserved`, reserved);
    }
    // setpriv holds CAP_SETUID until it drops, so it must not see LD_PRELOAD and the like: the
    // environment reaches it prefixed (inert), and env, already unprivileged, sets it.
    for (const [name, value] of Object.entries(env))
      args.push('--setenv', `${envPrefix}${name}`, value);
    command = [
      ...dropIdentity(identity),
      bashPath!,
      '--norc',
      '--noprofile',
      '-c',
      unprefixScript(startedDescriptor(request)),
      'coda-sandbox',
      cwd,
      ...command,
    ];
  } else {
    // Prefixed too: bash, started by bwrap, would read some names as its own (BASH_ENV, SHLVL).
    for (const [name, value] of Object.entries(env))
      args.push('--setenv', `${envPrefix}${name}`, value);
    const shell = [
      bashPath!,
      '--norc',
      '--noprofile',
      '-c',
      startScript(startedDescriptor(request)),
    ];
    command = [...shell, 'coda-sandbox', ...command];
  }
  args.push('--seccomp', String(seccompDescriptor(request)));
  return { options: args, command };
}

/**
 * A pre-started sandbox's bubblewrap options and command: the same confinement with an empty
 * environment, and the stub (prestart-stub.ts) instead of the command, behind the same setpriv
 * when the identity drops. The stub gets the cwd, environment and command on its pipe.
 */
export function prestartBwrapArguments(
  confinement: BwrapConfinement,
  request: Pick<LaunchRequest, 'extraPipes'>,
  cpu: boolean,
): { options: string[]; command: string[] } {
  const { identity } = confinement;
  const layout = { extraPipes: request.extraPipes, commandPipe: true };
  const stub = [
    bashPath!,
    '--norc',
    '--noprofile',
    '-c',
    stubScript(startedDescriptor(layout), commandDescriptor(layout), cpu),
    'coda-sandbox',
  ];
  return {
    options: [
      ...confinement.options,
      '--clearenv',
      '--seccomp',
      String(seccompDescriptor(request)),
    ],
    command: identity.kind === 'drop' ? [...dropIdentity(identity), ...stub] : stub,
  };
}

/** setpriv to `identity`, with no capability left to inherit or regain, then `--`. */
function dropIdentity(identity: { readonly uid: number; readonly gid: number }): string[] {
  return [
    setprivPath!,
    `--reuid=${identity.uid}`,
    `--regid=${identity.gid}`,
    '--clear-groups',
    '--inh-caps=-all',
    '--bounding-set=-all',
    '--',
  ];
}
