// What one run adds to the view, and the one rule that keeps those additions safe: nothing is
// mounted below another host directory the run binds. bubblewrap 0.8 looks a mount's
// destination up by name; below a bound host directory that name goes through a directory a
// concurrent run may be able to write, which could swap a component for a symlink between the
// check and the mount and land the mount on, say, the view's /etc (found by our own attack
// review: a cwd below restrictToDirectory, raced with renameat2, put a planted ld.so.preload
// into setpriv while it was still uid 0). So a path inside another addition is not bound again
// when it would get the same access through it, and refused when it would not.
import { lstatSync } from 'node:fs';
import { dirname } from 'node:path';
import { type CheckedPath, checkPath, isInside, pathError } from './checked-path.ts';
import type { BoundPath, ViewAdditions } from './filesystem-view.ts';

/**
 * Where the default view already shows a host tree read-only: a read-only addition there is
 * visible without a mount; a writable one is mounted through the host's own directories.
 */
export interface SystemRows {
  /** The read-only row that shows `path`, if one does (and no mask covers it). */
  rowOf(path: string): string | undefined;
}

/** One path a run wants in its view. */
export interface WantedPath {
  /** The option that named it, for errors (`cwd`, `readOnlyPaths.0`, ...). */
  readonly field: string;
  /** Real path (already resolved). */
  readonly path: string;
  readonly writable: boolean;
  /** Implicit (the program, the cwd): fine to reach through an enclosing addition. */
  readonly implicit: boolean;
}

/**
 * Pins every wanted path (into `pins`) and returns the binds for the view; `bySource` chooses
 * whether bubblewrap binds the pinned descriptor or the checked name. Throws
 * `SandboxValidationError` naming the field for a conflicting nested path, or a hidden path
 * inside a writable addition (a command there could move it out from under the mask).
 */
export function viewAdditions(
  wanted: readonly WantedPath[],
  hidden: readonly string[],
  pins: CheckedPath[],
  bySource: boolean,
  rows: SystemRows,
): ViewAdditions {
  const outermost = (entry: WantedPath): WantedPath | undefined =>
    wanted
      .filter((other) => other !== entry && isInside(entry.path, other.path))
      .filter((other) => other.path !== entry.path || wanted.indexOf(other) < wanted.indexOf(entry))
      .sort((a, b) => a.path.length - b.path.length)[0];
  const readOnly: BoundPath[] = [];
  const writable: BoundPath[] = [];
  for (const entry of wanted) {
    const outer = outermost(entry);
    if (outer !== undefined) {
      if (entry.implicit || outer.writable === entry.writable) continue;
      throw pathError(
        entry.field,
        `inside ${outer.field} (${outer.path}), which is bound ${outer.writable ? 'writable' : 'read-only'}: name a path outside it`,
        entry.path,
      );
    }
    // Below a system row (the view shows /usr, /etc, ... as the host has them) the mount's
    // destination is looked up through the host's own directories: read-only paths there are
    // visible already; a writable one is mounted only if no directory on its way can be written
    // by anyone but root (a second review raced a writable /usr/local/shared against another
    // run's /usr/local/shared/b and got the same /etc redirect).
    const row = rows.rowOf(entry.path);
    if (row !== undefined) {
      if (!entry.writable) continue;
      const open = writableParent(entry.path, row);
      if (open !== undefined) {
        throw pathError(
          entry.field,
          `${open} on its way from ${row} is writable by others than root: a concurrent run could redirect the mount`,
          entry.path,
        );
      }
    }
    const checked = checkPath(entry.path, entry.field, hidden);
    pins.push(checked);
    const bound = { source: bySource ? checked.source : checked.real, path: checked.real };
    (entry.writable ? writable : readOnly).push(bound);
  }
  hidden.forEach((path) => {
    const holder = wanted.find((entry) => entry.writable && isInside(path, entry.path));
    if (holder !== undefined) {
      throw pathError(
        'hidePaths',
        `${path} is inside ${holder.field} (${holder.path}), which is writable: a command could move it out from under the mask`,
        path,
      );
    }
  });
  return { readOnly, writable, hidden };
}

/** The first directory between `path` (exclusive) and `row` (inclusive) not root-owned 755-like. */
function writableParent(path: string, row: string): string | undefined {
  for (let dir = dirname(path); isInside(dir, row); dir = dirname(dir)) {
    const stat = lstatSync(dir);
    if (!stat.isDirectory() || stat.uid !== 0 || (stat.mode & 0o022) !== 0) return dir;
    if (dir === row || dir === '/') break;
  }
  return undefined;
}
