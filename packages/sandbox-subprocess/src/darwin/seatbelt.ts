// macOS: ulimit-based limits in front of a Seatbelt profile run by
// /usr/bin/sandbox-exec for no-network and write restrictions. Paths reach the profile as -D
// parameters, never spliced into its text. Generated and unit-tested here; untested on a Mac.
import { SandboxControl } from '../process/controls.ts';
import type { LaunchPlan, LaunchRequest } from '../process/launch-plan.ts';
import { ulimitSteps } from '../process/ulimit.ts';

/** Path of the Seatbelt runner on every macOS release that has one. */
export const sandboxExecPath = '/usr/bin/sandbox-exec';

/** The Seatbelt profile for a policy; writable paths come from the `WRITABLE_DIR` parameter. */
export function seatbeltProfile(options: {
  allowNetwork: boolean;
  allowFileWrites: boolean;
}): string {
  const lines = [
    '(version 1)',
    '(deny default)',
    '(allow process-exec)',
    '(allow process-fork)',
    '(allow signal (target same-sandbox))',
    '(allow file-read*)',
    '(allow sysctl-read)',
    '(allow mach-lookup)',
    '(allow ipc-posix-shm)',
    '(allow file-write-data (literal "/dev/null") (literal "/dev/zero") (literal "/dev/dtracehelper"))',
  ];
  if (options.allowFileWrites) {
    lines.push('(allow file-write* (subpath (param "WRITABLE_DIR")) (subpath (param "TMP_DIR")))');
  }
  if (options.allowNetwork) {
    lines.push('(allow network-outbound)', '(allow network-inbound)', '(allow system-socket)');
  } else {
    // Unix sockets stay usable (many tools talk to a local helper); IP networking does not.
    lines.push(
      '(allow network-outbound (remote unix-socket))',
      '(allow system-socket (socket-domain AF_UNIX))',
    );
  }
  return `${lines.join('\n')}\n`;
}

/** The argv (`/bin/sh -c 'ulimit ...; exec "$@"' ... sandbox-exec ...`) and controls for macOS. */
export function darwinPlan(request: LaunchRequest): LaunchPlan {
  const { policy, limits } = request;
  const controls: SandboxControl[] = [SandboxControl.cleanEnvironment];
  if (!policy.enabled) {
    return plainPlan(request, controls, 'sandbox disabled by policy');
  }
  // macOS's /bin/sh is bash: -u is RLIMIT_NPROC. RLIMIT_DATA is the only memory limit here.
  const ulimits = ulimitSteps(limits, { data: true, nprocFlag: '-u' }, controls);
  if (limits.maxMemoryMb > 0) controls.push(SandboxControl.memoryUlimit);
  const params = [
    '-D',
    `WRITABLE_DIR=${request.writableDirectory ?? request.cwd}`,
    '-D',
    `TMP_DIR=${request.env.TMPDIR ?? '/private/tmp'}`,
  ];
  controls.push(SandboxControl.seatbelt);
  if (!policy.allowNetwork) controls.push(SandboxControl.seatbeltNoNetwork);
  controls.push(
    request.writableDirectory === undefined
      ? SandboxControl.noFileWrites
      : SandboxControl.seatbeltNoWrites,
  );
  if (limits.timeoutMs > 0) controls.push(SandboxControl.wallClockTimeout);
  controls.push(SandboxControl.killProcessGroup);
  const profile = seatbeltProfile({
    allowNetwork: policy.allowNetwork,
    allowFileWrites: request.writableDirectory !== undefined,
  });
  return {
    file: '/bin/sh',
    args: [
      '-c',
      `${ulimits.join(' && ')} && exec "$@"`,
      'coda-sandbox',
      sandboxExecPath,
      '-p',
      profile,
      ...params,
      request.executable,
      ...request.args,
    ],
    controls,
    sandboxApplied: true,
    confinement: 'seatbelt',
    cwd: request.cwd ?? process.cwd(),
    env: request.env,
    cgroups: undefined,
    detached: true,
    fallbackReason: undefined,
  };
}

/** Runs the command as it is: no confinement, a process group to kill. */
export function plainPlan(
  request: LaunchRequest,
  controls: SandboxControl[],
  reason: string,
): LaunchPlan {
  return {
    file: request.executable,
    args: request.args,
    controls: [...controls, SandboxControl.killProcessGroup],
    sandboxApplied: false,
    confinement: 'none',
    cwd: request.cwd ?? process.cwd(),
    env: request.env,
    cgroups: undefined,
    detached: process.platform !== 'win32',
    fallbackReason: reason,
  };
}
