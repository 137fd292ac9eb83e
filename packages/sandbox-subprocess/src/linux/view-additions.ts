// What one run adds to the view, and the one rule that keeps those additions safe: nothing is
// mounted below another host directory the run binds. bubblewrap 0.8 looks a mount's
// destination up by name; below a bound host directory that name goes through a directory a
// concurrent run may be able to write, which could swap a component for a symlink between the
// check and the mount and land the mount on, say, the view's /etc (found by our own attack
// review: a cwd below restrictToDirectory, raced with renameat2, put a planted ld.so.preload
// into setpriv while it was still uid 0). So a path inside another addition is not bound again
// when it would get the same access through it, and refused when it would not.
import { type CheckedPath, checkPath, isInside, pathError } from './checked-path.ts';
import type { BoundPath, ViewAdditions } from './filesystem-view.ts';

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
