// Finds the absolute path of a command the way a shell would, using the command's own PATH:
// bubblewrap does not search PATH, and a missing binary must be a clear error, not an exit 127.
import { accessSync, constants, statSync } from 'node:fs';
import { delimiter, isAbsolute, join, resolve } from 'node:path';

/** The absolute path of `file`, or `undefined` when no executable file is found. */
export function resolveExecutable(
  file: string,
  cwd: string,
  path: string | undefined,
): string | undefined {
  if (file.includes('/') || (process.platform === 'win32' && file.includes('\\'))) {
    const candidate = isAbsolute(file) ? file : resolve(cwd, file);
    return isExecutableFile(candidate) ? candidate : undefined;
  }
  for (const dir of (path ?? '').split(delimiter)) {
    if (dir === '') continue;
    const candidate = join(isAbsolute(dir) ? dir : resolve(cwd, dir), file);
    if (isExecutableFile(candidate)) return candidate;
  }
  return undefined;
}

function isExecutableFile(candidate: string): boolean {
  try {
    if (!statSync(candidate).isFile()) return false;
    accessSync(candidate, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}
