// Finds bubblewrap and the host-side helpers and checks once that bubblewrap can create the
// namespaces this package asks for (AppArmor on some distributions blocks unprivileged user
// namespaces). bash, setpriv and env come from fixed system directories, never from a PATH.
import { spawnSync } from 'node:child_process';
import { closeSync, existsSync } from 'node:fs';
import { resolveExecutable } from '../process/resolve-executable.ts';
import { unlinkedFile } from '../process/unlinked-file.ts';
import { seccompProgram } from './seccomp/program-cache.ts';
import { helperEnvironment } from './wrapper-shell.ts';

const systemPath = (name: string): string | undefined =>
  [`/usr/bin/${name}`, `/bin/${name}`].find((path) => existsSync(path));

/** bash, for the wrapper (it can close descriptors above 9 and read NUL-delimited input). */
export const bashPath = systemPath('bash');
/** util-linux setpriv, which drops to the run's identity inside the sandbox. */
export const setprivPath = systemPath('setpriv');
/** perl (perl-base, Essential on Debian and Ubuntu): runs the Landlock backend's applier. */
export const perlPath = systemPath('perl');

/** What the Linux path can use on this host. */
export interface LinuxSupport {
  /** Absolute path of a working bwrap, when there is one. */
  readonly bwrap: string | undefined;
  /** Absolute path of util-linux `prlimit`, when there is one. */
  readonly prlimit: string | undefined;
  /** Whether bwrap can also create a network namespace here. */
  readonly networkNamespace: boolean;
  /** Why bwrap is not used, when it is not. */
  readonly reason: string | undefined;
}

/**
 * How bubblewrap is started: `drop` (a root host: no user namespace, the command dropped to
 * uid 65534 inside), `caller` (a user namespace of its own: the host's own uid, mapped).
 */
export type BwrapMode = 'drop' | 'caller';

const cache = new Map<string, LinuxSupport>();

/**
 * Detects support for the host PATH given (cached per PATH value, so detection is cheap). The
 * default mode is the one runs under the default identity use: `drop` on a root host, `caller`
 * elsewhere (where the caller's uid is already unprivileged).
 */
export function detectLinux(
  hostPath: string | undefined = process.env.PATH,
  mode: BwrapMode = process.getuid?.() === 0 ? 'drop' : 'caller',
): LinuxSupport {
  const key = `${mode}:${hostPath ?? ''}`;
  let support = cache.get(key);
  if (support === undefined) {
    support = probe(hostPath, mode);
    cache.set(key, support);
  }
  return support;
}

function probe(hostPath: string | undefined, mode: BwrapMode): LinuxSupport {
  const prlimit = resolveExecutable('prlimit', '/', hostPath);
  const bwrap = resolveExecutable('bwrap', '/', hostPath);
  const tools = { prlimit };
  if (bwrap === undefined) {
    return { bwrap, ...tools, networkNamespace: false, reason: 'bwrap not found on PATH' };
  }
  const truePath = resolveExecutable('true', '/', hostPath) ?? '/bin/true';
  const withNet = attempt(bwrap, truePath, true, mode);
  if (withNet === undefined) return { bwrap, ...tools, networkNamespace: true, reason: undefined };
  // Some hosts refuse only the network namespace (bwrap: loopback: Failed RTM_NEWADDR); the
  // seccomp socket rule still keeps the network off there.
  if (attempt(bwrap, truePath, false, mode) === undefined) {
    return { bwrap, ...tools, networkNamespace: false, reason: undefined };
  }
  return {
    bwrap: undefined,
    ...tools,
    networkNamespace: false,
    reason: `bwrap cannot create namespaces here: ${withNet}`,
  };
}

/** Runs bwrap once with this package's namespaces; returns why it failed, or undefined. */
function attempt(
  bwrap: string,
  truePath: string,
  network: boolean,
  mode: BwrapMode,
): string | undefined {
  // A root host's runs drop to uid 65534 inside: where that uid is not mapped (a user namespace
  // with one uid, as in rootless containers) the drop fails, and so must the probe.
  const drop =
    mode === 'drop' && setprivPath !== undefined
      ? [setprivPath, '--reuid=65534', '--regid=65534', '--clear-groups', '--']
      : [];
  let fd: number | undefined;
  try {
    fd = unlinkedFile(seccompProgram({ allowNetwork: false }));
    const result = spawnSync(
      bwrap,
      [
        // As runs do: a root host's bwrap builds the view without a user namespace.
        ...(mode === 'drop' ? [] : ['--unshare-user', '--disable-userns']),
        '--unshare-pid',
        '--unshare-ipc',
        '--unshare-uts',
        ...(network ? ['--unshare-net'] : []),
        '--die-with-parent',
        '--new-session',
        '--cap-drop',
        'ALL',
        // The drop needs these three, as in runs (linux-plan.ts).
        ...(drop.length > 0
          ? ['--cap-add', 'CAP_SETUID', '--cap-add', 'CAP_SETGID', '--cap-add', 'CAP_SETPCAP']
          : []),
        '--ro-bind',
        '/',
        '/',
        '--proc',
        '/proc',
        '--dev',
        '/dev',
        '--seccomp',
        '3',
        '--',
        ...drop,
        truePath,
      ],
      { stdio: ['ignore', 'ignore', 'pipe', fd], timeout: 10_000, env: helperEnvironment },
    );
    if (result.status === 0) return undefined;
    const stderr = result.stderr?.toString().trim() ?? '';
    return stderr || (result.error?.message ?? `exit ${result.status}`);
  } catch (error) {
    return String(error);
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}
