// Whether the Landlock backend works on this host, checked once by running it: the kernel's ABI
// version, then the applier itself (perl, no_new_privs, a ruleset, the seccomp filter) on
// /bin/true, as the identity runs will use.
import { spawnSync } from 'node:child_process';
import { closeSync } from 'node:fs';
import { resolveExecutable } from '../../process/resolve-executable.ts';
import { unlinkedFile } from '../../process/unlinked-file.ts';
import { perlPath, setprivPath } from '../detect.ts';
import { seccompProgram } from '../seccomp/program-cache.ts';
import { helperEnvironment } from '../wrapper-shell.ts';
import { handledFsRights, readRights } from './landlock-abi.ts';
import { applierArgv, encodeInstructions } from './landlock-plan.ts';

/** What the Landlock backend can do here. */
export interface LandlockSupport {
  /** The kernel's Landlock ABI version, when the backend works. */
  readonly abi: number | undefined;
  /** Root host: whether dropping to uid 65534 before the applier works (a single-uid namespace refuses it). */
  readonly dropWorks: boolean;
  /** Why the backend does not work, when it does not. */
  readonly reason: string | undefined;
}

let cached: LandlockSupport | undefined;

/** Probes once per process. */
export function detectLandlock(): LandlockSupport {
  cached ??= probe();
  return cached;
}

function probe(): LandlockSupport {
  if (perlPath === undefined || setprivPath === undefined) {
    const missing = perlPath === undefined ? 'perl' : 'util-linux setpriv';
    return { abi: undefined, dropWorks: false, reason: `${missing} not found in /usr/bin or /bin` };
  }
  const version = spawnSync(
    perlPath,
    ['-e', 'my $v = syscall(444, 0, 0, 1); print $v < 0 ? "errno " . ($! + 0) : $v'],
    {
      env: helperEnvironment,
      encoding: 'utf8',
      timeout: 10_000,
    },
  );
  const abi = Number.parseInt(version.stdout ?? '', 10);
  if (!(abi >= 1)) {
    return {
      abi: undefined,
      dropWorks: false,
      reason: `the kernel offers no Landlock (landlock_create_ruleset: ${version.stdout || version.error?.message || 'failed'})`,
    };
  }
  const root = process.getuid?.() === 0;
  const failure = attempt(abi, root);
  if (failure === undefined) return { abi, dropWorks: root, reason: undefined };
  if (root && attempt(abi, false) === undefined)
    return { abi, dropWorks: false, reason: undefined };
  return { abi: undefined, dropWorks: false, reason: `the Landlock applier failed: ${failure}` };
}

/** Runs the applier once on /bin/true; returns why it failed, or undefined. */
function attempt(abi: number, drop: boolean): string | undefined {
  const truePath = resolveExecutable('true', '/', '/usr/bin:/bin') ?? '/bin/true';
  const instructions = encodeInstructions({
    handledFs: handledFsRights(abi),
    handledNet: 0,
    scoped: 0,
    paths: ['/usr', '/bin', '/lib', '/lib64'].map((path) => ({ path, access: readRights })),
    ports: [],
    env: {},
    cwd: '/',
    command: [truePath],
  });
  const fds: number[] = [];
  try {
    fds.push(unlinkedFile(seccompProgram({ allowNetwork: false })));
    fds.push(unlinkedFile(Buffer.from(instructions)));
    const [file, ...args] = [
      setprivPath!,
      ...(drop ? ['--reuid=65534', '--regid=65534', '--clear-groups'] : []),
      '--inh-caps=-all',
      ...(process.getuid?.() === 0 ? ['--bounding-set=-all'] : []),
      '--',
      ...applierArgv({ extraPipes: 0 }, true),
    ];
    const result = spawnSync(file!, args, {
      stdio: ['ignore', 'ignore', 'pipe', ...fds],
      timeout: 10_000,
      env: helperEnvironment,
    });
    if (result.status === 0) return undefined;
    const stderr = result.stderr?.toString().trim() ?? '';
    return stderr || (result.error?.message ?? `exit ${result.status}`);
  } catch (error) {
    return String(error);
  } finally {
    for (const fd of fds) closeSync(fd);
  }
}
