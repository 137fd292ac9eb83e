// Finds bubblewrap, prlimit and setpriv and checks once that bubblewrap can create the namespaces this
// package asks for (AppArmor on some distributions blocks unprivileged user namespaces).
import { spawnSync } from 'node:child_process';
import { closeSync } from 'node:fs';
import { resolveExecutable } from '../process/resolve-executable.ts';
import { openSeccompFilter } from './seccomp/filter-file.ts';

/** What the Linux path can use on this host. */
export interface LinuxSupport {
  /** Absolute path of a working bwrap, when there is one. */
  readonly bwrap: string | undefined;
  /** Absolute path of util-linux `prlimit`, when there is one. */
  readonly prlimit: string | undefined;
  /** Absolute path of util-linux `setpriv` (for `runAs`), when there is one. */
  readonly setpriv: string | undefined;
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
  const setpriv = resolveExecutable('setpriv', '/', hostPath);
  const bwrap = resolveExecutable('bwrap', '/', hostPath);
  const tools = { prlimit, setpriv };
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
    fd = openSeccompFilter({ allowNetwork: false });
    const result = spawnSync(
      bwrap,
      [
        '--unshare-user',
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
      { stdio: ['ignore', 'ignore', 'pipe', fd], timeout: 10_000, env: {} },
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
