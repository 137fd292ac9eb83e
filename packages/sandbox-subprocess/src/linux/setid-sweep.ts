// The second line behind the seccomp rule that refuses set-id bits (chmod, open, mknod): after a
// run, every file and directory its writable directories hold is checked, and a set-user-id or
// set-group-id bit found is removed, so no set-id file outlives the run on the host.
import { chmodSync, type Dirent, lstatSync, readdirSync } from 'node:fs';
import { join } from 'node:path';

/** S_ISUID | S_ISGID. */
const setIdBits = 0o6000;
/** More entries than this are not walked (the sweep then reports it did not finish). */
export const sweepEntryLimit = 50_000;

/** What a sweep did. */
export interface SetIdSweep {
  /** Every entry was checked. */
  readonly complete: boolean;
  /** Paths whose set-id bits were removed. */
  readonly cleared: readonly string[];
}

/**
 * Checks every entry under `dirs` (not following symlinks) and clears set-id bits. Synchronous:
 * `execSync` needs it too, and the walk is bounded by {@link sweepEntryLimit}.
 */
export function sweepSetIdFiles(dirs: readonly string[]): SetIdSweep {
  const cleared: string[] = [];
  let entries = 0;
  let complete = true;
  const check = (path: string): void => {
    const { mode } = lstatSync(path);
    if ((mode & setIdBits) === 0 || (mode & 0o170000) === 0o120000) return;
    chmodSync(path, mode & 0o7777 & ~setIdBits);
    cleared.push(path);
  };
  // Depth first with an explicit stack, so the bound holds before a huge directory is read.
  const stack = [...dirs];
  try {
    for (const dir of dirs) check(dir);
    while (stack.length > 0) {
      const dir = stack.pop()!;
      const found: Dirent[] = readdirSync(dir, { withFileTypes: true });
      entries += found.length;
      if (entries > sweepEntryLimit) {
        complete = false;
        break;
      }
      for (const entry of found) {
        if (entry.isSymbolicLink()) continue;
        const path = join(dir, entry.name);
        check(path);
        if (entry.isDirectory()) stack.push(path);
      }
    }
  } catch {
    complete = false; // a path that vanished or could not be read: the sweep did not finish
  }
  return { complete, cleared };
}
