// Turns a policy and one command into the argv that confines it on Linux: bubblewrap (namespaces,
// read-only root, chosen writable paths, seccomp) behind a one-line shell that joins the run's
// cgroups and sets rlimits before anything else runs. Without a usable bwrap the same
// chain runs the command directly: rlimits, cgroups, a process group, and no isolation.
import { closeSync, existsSync, realpathSync, statSync } from 'node:fs';
import { SandboxUnavailableError } from '@coda/sandbox-core';
import { SandboxControl } from '../process/controls.ts';
import type { LaunchPlan, LaunchRequest } from '../process/launch-plan.ts';
import { shellQuote } from '../process/shell-quote.ts';
import { ulimitSteps } from '../process/ulimit.ts';
import {
  type CgroupSupport,
  createRunCgroups,
  detectCgroups,
  type RunCgroupLimits,
} from './cgroup.ts';
import { detectLinux } from './detect.ts';
import {
  discardLauncher,
  type Launcher,
  type LauncherShape,
  takeLauncher,
} from './launcher-pool.ts';
import { openSeccompFilter, seccompFilterPath } from './seccomp/filter-file.ts';

const mib = 1024 * 1024;

/** Builds the Linux launch plan; `bwrap: false` forces the fallback (for tests and strict checks). */
export function linuxPlan(request: LaunchRequest): LaunchPlan {
  const { policy, limits } = request;
  const support = detectLinux(request.hostPath);
  const useBwrap = policy.enabled && support.bwrap !== undefined;
  const controls: SandboxControl[] = [SandboxControl.cleanEnvironment];

  const wanted = { memoryBytes: limits.maxMemoryMb * mib, pids: limits.rlimits.processes };
  const cgroupSupport = policy.enabled ? detectCgroups() : undefined;
  const shape: LauncherShape = {
    memory: wanted.memoryBytes > 0 && cgroupSupport?.memory !== undefined,
    pids: wanted.pids > 0 && cgroupSupport?.pids !== undefined,
    extraPipes: request.extraPipes,
    detached: !useBwrap,
  };
  if (
    policy.enabled &&
    limits.maxMemoryMb > 0 &&
    !shape.memory &&
    limits.memoryFallback === 'refuse'
  ) {
    throw new SandboxUnavailableError(
      'No writable memory cgroup on this host and memoryFallback is "refuse"',
      { details: { reason: 'no memory cgroup' } },
    );
  }
  const launcher =
    cgroupSupport !== undefined && (shape.memory || shape.pids) && poolable(request)
      ? takeReadyLauncher(cgroupSupport, shape, wanted)
      : undefined;
  const cgroups =
    launcher?.cgroups ??
    (cgroupSupport === undefined ? undefined : createRunCgroups(cgroupSupport, wanted));
  if (cgroups !== undefined) controls.push(...cgroups.controls);
  const hasMemoryCgroup =
    cgroups?.controls.some(
      (c) => c === SandboxControl.memoryCgroupV1 || c === SandboxControl.memoryCgroupV2,
    ) ?? false;
  const hasPidsCgroup =
    cgroups?.controls.some(
      (c) => c === SandboxControl.pidsCgroupV1 || c === SandboxControl.pidsCgroupV2,
    ) ?? false;

  let argv: string[] = [];
  let seccompFd: number | undefined;
  let seccompPath: string | undefined;
  const seccompFdNumber = 3 + request.extraPipes;
  if (useBwrap) {
    const filter = { allowNetwork: policy.allowNetwork, allowedSyscalls: policy.allowedSyscalls };
    // A launcher opens the filter file itself (it was started before this run's policy was known).
    if (launcher === undefined) seccompFd = openSeccompFilter(filter);
    else seccompPath = seccompFilterPath(filter);
    const bwrap = bwrapArgs(request, seccompFdNumber, controls, support.networkNamespace);
    argv = [support.bwrap!, ...bwrap];
  } else {
    argv = [request.executable, ...request.args];
  }

  if (policy.enabled && policy.runAs !== undefined) {
    if (support.setpriv === undefined) {
      if (launcher !== undefined) discardLauncher(launcher);
      else cgroups?.removeSync();
      if (seccompFd !== undefined) closeSync(seccompFd);
      throw new SandboxUnavailableError('runAs needs util-linux setpriv, which is not on PATH');
    }
    const { uid, gid } = policy.runAs;
    argv = [support.setpriv, `--reuid=${uid}`, `--regid=${gid}`, '--clear-groups', '--', ...argv];
    controls.push(SandboxControl.runAsUser);
  }
  let launch: LaunchPlan['launcher'];
  if (policy.enabled) {
    const needsNproc = !hasPidsCgroup && (process.getuid?.() !== 0 || policy.runAs !== undefined);
    if (needsNproc && support.prlimit !== undefined) {
      // The one limit whose ulimit flag differs between shells (-p in dash, -u in bash).
      argv = [support.prlimit, `--nproc=${limits.rlimits.processes}`, '--', ...argv];
      controls.push(SandboxControl.rlimitNproc);
    }
    // The last resort for memory is RLIMIT_DATA (heap and private mappings since Linux 4.7);
    // under about 1 GiB it stops V8 programs from starting, as the docs say.
    const dataFallback = !hasMemoryCgroup && limits.memoryFallback === 'rlimit-data';
    const ulimits = ulimitSteps(limits, { data: dataFallback }, controls);
    if (launcher !== undefined) {
      // The launcher already sits in the run's groups; the line sets the rest and becomes bwrap.
      const seccomp =
        seccompPath === undefined ? undefined : { fd: seccompFdNumber, path: seccompPath };
      const line = launcherLine(ulimits, request, argv, seccomp);
      if (line.includes('\n')) {
        // A resolved path (a symlink target, the temp dir) brought a newline: start cold.
        discardLauncher(launcher);
        return linuxPlan({ ...request, synchronous: true });
      }
      launch = { launcher, line: `${line}\n` };
    } else {
      const steps = [
        ...(cgroups?.procsFiles ?? []).map((file) => `echo $$ > ${shellQuote(file)}`),
        ...ulimits,
        'exec "$@"',
      ];
      // One shell joins the cgroups and sets the rlimits, then becomes bwrap (or the command):
      // nothing of the run exists outside its cgroups, and only one extra exec is paid.
      argv = ['/bin/sh', '-c', steps.join(' && '), 'coda-sandbox', ...argv];
    }
    if (dataFallback && limits.maxMemoryMb > 0) controls.push(SandboxControl.memoryRlimitData);
  }
  if (policy.enabled && limits.timeoutMs > 0) controls.push(SandboxControl.wallClockTimeout);
  controls.push(useBwrap ? SandboxControl.killPidNamespace : SandboxControl.killProcessGroup);

  return {
    file: argv[0]!,
    args: argv.slice(1),
    controls,
    sandboxApplied: useBwrap,
    seccompFd,
    cgroups,
    detached: !useBwrap,
    launcher: launch,
    fallbackReason: useBwrap
      ? undefined
      : policy.enabled
        ? support.reason
        : 'sandbox disabled by policy',
  };
}

/**
 * The one line a warm launcher reads and evals: rlimits, cwd, environment (names are validated
 * identifiers, values single-quoted), then `exec` of the argv with the seccomp file opened on
 * its descriptor number. Nothing in it is expanded by the shell.
 */
function launcherLine(
  ulimits: readonly string[],
  request: LaunchRequest,
  argv: readonly string[],
  seccomp: { fd: number; path: string } | undefined,
): string {
  const exports = Object.entries(request.env).map(
    ([name, value]) => `${name}=${shellQuote(value)}`,
  );
  const redirect = seccomp === undefined ? '' : ` ${seccomp.fd}< ${shellQuote(seccomp.path)}`;
  return [
    ...ulimits,
    `cd -- ${shellQuote(request.cwd)}`,
    'unset OLDPWD', // set by `cd`; the cold path's command never sees it
    ...(exports.length > 0 ? [`export ${exports.join(' ')}`] : []),
    `exec ${argv.map(shellQuote).join(' ')}${redirect}`,
  ].join(' && ');
}

/**
 * Whether a launcher can carry this run: its line is read up to the first newline, and dash
 * redirects only single-digit descriptors (the seccomp fd follows the extra pipes).
 */
function poolable(request: LaunchRequest): boolean {
  if (request.synchronous === true || 3 + request.extraPipes > 9) return false;
  const words = [
    request.executable,
    request.cwd,
    ...request.args,
    ...request.readOnlyPaths,
    ...(request.writableDirectory === undefined ? [] : [request.writableDirectory]),
    ...request.policy.hidePaths,
    ...Object.values(request.env),
  ];
  return !words.some((word) => word.includes('\n'));
}

/** A pooled launcher with the run's limits written, or undefined (start cold). */
function takeReadyLauncher(
  support: CgroupSupport,
  shape: LauncherShape,
  limits: RunCgroupLimits,
): Launcher | undefined {
  const launcher = takeLauncher(support, shape);
  if (launcher === undefined) return undefined;
  try {
    launcher.cgroups.setLimits(limits);
    return launcher;
  } catch {
    discardLauncher(launcher);
    return undefined;
  }
}

/** bubblewrap's arguments up to and including the command. */
export function bwrapArgs(
  request: LaunchRequest,
  seccompFdNumber: number,
  controls: SandboxControl[],
  networkNamespace = true,
): string[] {
  const { policy, limits } = request;
  const args = [
    '--new-session',
    '--die-with-parent',
    '--unshare-user',
    '--disable-userns',
    '--unshare-pid',
    '--unshare-ipc',
    '--unshare-uts',
  ];
  controls.push(
    SandboxControl.bubblewrap,
    SandboxControl.userNamespace,
    SandboxControl.pidNamespace,
    SandboxControl.ipcNamespace,
    SandboxControl.utsNamespace,
    SandboxControl.mountNamespace,
  );
  if (!policy.allowNetwork && networkNamespace) {
    args.push('--unshare-net');
    controls.push(SandboxControl.networkNamespace);
  }
  const tmpSize = limits.maxMemoryMb > 0 ? limits.maxMemoryMb * mib : 512 * mib;
  args.push('--cap-drop', 'ALL', '--ro-bind', '/', '/', '--dev', '/dev', '--proc', '/proc');
  args.push('--size', String(tmpSize), '--tmpfs', '/tmp');
  controls.push(SandboxControl.readOnlyRoot, SandboxControl.privateTmp);

  for (const path of policy.hidePaths) {
    const real = realOrUndefined(path);
    if (real === undefined) continue;
    if (statSync(real).isDirectory()) args.push('--tmpfs', real);
    else args.push('--ro-bind', '/dev/null', real);
  }
  if (policy.hidePaths.length > 0) controls.push(SandboxControl.hiddenPaths);

  if (request.writableDirectory !== undefined) {
    args.push('--bind', request.writableDirectory, request.writableDirectory);
    controls.push(SandboxControl.writableDirectory);
  } else {
    controls.push(SandboxControl.noFileWrites);
  }
  // The cwd and the program stay visible even under /tmp or a hidden path, and the caller's
  // read-only paths always; bound after the writable directory so that a read-only path inside
  // it wins.
  const writable = request.writableDirectory;
  const overlaid = [
    '/tmp',
    '/dev',
    '/proc',
    ...policy.hidePaths.map((path) => realOrUndefined(path) ?? path),
  ];
  const implicit = [request.cwd, request.executable].filter(
    (path) =>
      (writable === undefined || !isInside(path, writable)) &&
      overlaid.some((dir) => isInside(path, dir)),
  );
  for (const path of new Set([...implicit, ...request.readOnlyPaths])) {
    args.push('--ro-bind', path, path);
  }
  if (request.writableDirectory === undefined) args.push('--remount-ro', '/tmp');
  args.push('--chdir', request.cwd, '--seccomp', String(seccompFdNumber));
  controls.push(
    SandboxControl.newSession,
    SandboxControl.capabilitiesDropped,
    SandboxControl.noNewPrivileges,
    SandboxControl.seccomp,
  );
  if (policy.allowedSyscalls !== undefined) controls.push(SandboxControl.seccompAllowlist);
  if (!policy.allowNetwork) controls.push(SandboxControl.seccompNoInet);
  args.push('--', request.executable, ...request.args);
  return args;
}

function isInside(path: string, dir: string): boolean {
  return path === dir || path.startsWith(dir.endsWith('/') ? dir : `${dir}/`);
}

function realOrUndefined(path: string): string | undefined {
  if (!existsSync(path)) return undefined;
  return realpathSync(path);
}
