// Finds the Python interpreter a host's children run, once, when the host is created: asks the
// interpreter the user named (a path, or a name on PATH) for its real executable, its version
// and its standard library, so that children run that executable directly (not a version
// manager's shim script, which needs an environment the children do not get) and the sandbox can
// show them exactly those directories.
import { execFileSync } from 'node:child_process';
import { accessSync, constants, realpathSync, statSync } from 'node:fs';
import { delimiter, join, sep } from 'node:path';
import { SandboxValidationError } from '@coda/sandbox-core';

/** The oldest Python the runner supports (`sys.addaudithook` is 3.8; `-I` with `-X` and typing: 3.9). */
export const minimumPythonVersion = [3, 9] as const;

/** A Python interpreter as the children run it. */
export interface PythonInterpreter {
  /** Real path of the executable (`sys.executable`, symlinks resolved). */
  executable: string;
  /** `major.minor.micro`. */
  version: string;
  /** Real paths of the standard library directories (`sys.path` in isolated mode, no site). */
  stdlib: string[];
}

// Printed by the interpreter itself under `-I -S`, as the children start it.
const probe =
  'import json, os, sys; print(json.dumps({"executable": sys.executable, ' +
  '"version": list(sys.version_info[:3]), ' +
  '"stdlib": [p for p in sys.path if os.path.isdir(p)]}))';

function refuse(given: string, message: string): never {
  throw new SandboxValidationError(`Invalid parser host options: python: ${message}`, {
    issues: [{ path: 'python', message, received: JSON.stringify(given) }],
  });
}

/** Whether every user may reach `path`: each directory above it searchable, itself readable. */
function openToEveryone(path: string): boolean {
  try {
    const parts = path.split(sep).filter(Boolean);
    for (let depth = 0; depth < parts.length; depth++) {
      const at = sep + parts.slice(0, depth).join(sep);
      if ((statSync(at).mode & 0o001) === 0) return false;
    }
    return (statSync(path).mode & 0o004) !== 0;
  } catch {
    return false;
  }
}

/** The `python3` files on PATH, in order. */
function pythonsOnPath(): string[] {
  return (process.env.PATH ?? '').split(delimiter).flatMap((dir) => {
    const candidate = join(dir, 'python3');
    try {
      accessSync(candidate, constants.X_OK);
      return [candidate];
    } catch {
      return [];
    }
  });
}

/**
 * The interpreter children run. Given a path or name, that one. Otherwise the first `python3` on
 * PATH whose executable and standard library every user can read: on a root host the sandboxed
 * child runs as uid 65534, and a version manager's build in a private home (`~/.pyenv` under a
 * 0700 `/root`) is out of its reach; when none is, the first (the sandbox then says why).
 * Throws a `SandboxValidationError` naming `python` when it cannot be started or is older
 * than 3.9.
 */
export function findPythonInterpreter(given?: string): PythonInterpreter {
  if (given !== undefined) return probeInterpreter(given);
  const candidates = pythonsOnPath();
  if (candidates.length === 0) return probeInterpreter('python3');
  let first: PythonInterpreter | undefined;
  for (const candidate of candidates) {
    let found: PythonInterpreter;
    try {
      found = probeInterpreter(candidate);
    } catch {
      continue;
    }
    if ([found.executable, ...found.stdlib].every(openToEveryone)) return found;
    first ??= found;
  }
  return first ?? probeInterpreter('python3');
}

function probeInterpreter(given: string): PythonInterpreter {
  let output: string;
  try {
    output = execFileSync(given, ['-I', '-S', '-c', probe], {
      encoding: 'utf8',
      // Only what finding the interpreter needs (PATH; HOME for a version manager's shim).
      env: Object.fromEntries(
        ['PATH', 'HOME'].flatMap((name) =>
          process.env[name] === undefined ? [] : [[name, process.env[name]]],
        ),
      ),
      timeout: 15_000,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
  } catch (error) {
    const reason = error instanceof Error ? error.message.split('\n')[0] : String(error);
    return refuse(given, `cannot start ${given}: ${reason}`);
  }
  let found: { executable: string; version: number[]; stdlib: string[] };
  try {
    found = JSON.parse(output.trim().split('\n').at(-1) ?? '');
  } catch {
    return refuse(given, `${given} did not answer like a Python interpreter`);
  }
  const [major = 0, minor = 0, micro = 0] = found.version;
  const version = `${major}.${minor}.${micro}`;
  const [wantMajor, wantMinor] = minimumPythonVersion;
  if (major !== wantMajor || minor < wantMinor) {
    return refuse(
      given,
      `${given} is Python ${version}; the runner needs ${wantMajor}.${wantMinor} or newer`,
    );
  }
  return {
    executable: realpathSync(found.executable),
    version,
    stdlib: [...new Set(found.stdlib.map((path) => realpathSync(path)))],
  };
}
