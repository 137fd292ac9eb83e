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
/** perl (perl-base), which runs the egress forwarder inside a run with a network allowlist. */
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

const cache = new Map<string, LinuxSupport>();

/** Detects support for the host PATH given (cached per PATH value, so detection is cheap). */
export function detectLinux(hostPath: string | undefined = process.env.PATH): LinuxSupport {
  const key = hostPath ?? '';
  let support = cache.get(key);
  if (support === undefined) {
    support = probe(hostPath);
    cache.set(key, support);
  }
  return support;
}

function probe(hostPath: string | undefined): LinuxSupport {
  const prlimit = resolveExecutable('prlimit', '/', hostPath);
  const bwrap = resolveExecutable('bwrap', '/', hostPath);
  const tools = { prlimit };
  if (bwrap === undefined) {
    return { bwrap, ...tools, networkNamespace: false, reason: 'bwrap not found on PATH' };
  }
  const truePath = resolveExecutable('true', '/', hostPath) ?? '/bin/true';
  const withNet = attempt(bwrap, truePath, true);
  if (withNet === undefined) return { bwrap, ...tools, networkNamespace: true, reason: undefined };
  // Some hosts refuse only the network namespace (bwrap: loopback: Failed RTM_NEWADDR); the
  // seccomp socket rule still keeps the network off there.
  if (attempt(bwrap, truePath, false) === undefined) {
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
function attempt(bwrap: string, truePath: string, network: boolean): string | undefined {
  let fd: number | undefined;
  try {
    fd = unlinkedFile(seccompProgram({ allowNetwork: false }));
    const result = spawnSync(
      bwrap,
      [
        // As runs do: a root host's bwrap builds the view without a user namespace.
        ...(process.getuid?.() === 0 ? [] : ['--unshare-user']),
        '--unshare-pid',
        '--unshare-ipc',
        '--unshare-uts',
        ...(network ? ['--unshare-net'] : []),
        '--die-with-parent',
        '--new-session',
        '--cap-drop',
        'ALL',
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
