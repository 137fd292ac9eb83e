// The second line behind the seccomp rule that refuses set-id bits (chmod, open, mknod): after a
// run, every file and directory its writable directories hold is checked: a set-id bit on a
// directory (which the kernel sets by itself) is removed, and a set-id file (which a run cannot
// make) is reported, so no set-id entry outlives the run on the host unnoticed.
//
// The host may be root, and another run sharing the directory may still be running and renaming
// entries while the sweep walks, so no name is looked up twice and no symlink is ever followed:
// each entry is opened once with O_PATH | O_NOFOLLOW through its directory's descriptor
// (`/proc/self/fd/N/name`; Node has no openat), checked with fstat and changed through its own
// descriptor. Found by an attack review: the walk went by path (lstat, then chmod, then readdir
// of a directory listed earlier), so a concurrent run swapping a directory for a symlink with
// renameat2(RENAME_EXCHANGE) made the host chmod files outside the directory (a root-only file
// became 0755, host set-uid programs lost their bit) in 1 to 183 sweeps.
import {
  chmodSync,
  closeSync,
  constants,
  fstatSync,
  type OpenDirOptions,
  opendirSync,
  openSync,
} from 'node:fs';
import { join } from 'node:path';

/** S_ISUID | S_ISGID. */
const setIdBits = 0o6000;
/** More entries than this are not walked (the sweep then reports it did not finish). */
export const sweepEntryLimit = 50_000;
/** Deeper directories than this are not walked (a descriptor is held per level). */
export const sweepDepthLimit = 256;
/** Linux's O_PATH (the same value on every architecture the package supports); not in Node's table. */
const openPath = 0o10000000;
const { O_RDONLY, O_DIRECTORY, O_NOFOLLOW } = constants;

/** What a sweep did. */
export interface SetIdSweep {
  /** Every entry was checked. */
  readonly complete: boolean;
  /** Paths whose set-id bits were removed. */
  readonly cleared: readonly string[];
}

/** Names as bytes (Node takes 'buffer' here; its types list only string encodings). */
const listBytes = { encoding: 'buffer', bufferSize: 1024 } as unknown as OpenDirOptions;

/** The walk stopped at a bound; the sweep is incomplete. */
class SweepBound extends Error {}

/** The path the kernel resolves to the object a descriptor holds, never by name again. */
const held = (fd: number): string => `/proc/self/fd/${fd}`;

/**
 * Opens `name` (its bytes as listed: a name need not be UTF-8) in the directory `dirFd` holds,
 * without following it; undefined if it is gone (a run sharing the directory may still run).
 */
function openEntry(dirFd: number, name: Buffer): number | undefined {
  try {
    return openSync(Buffer.concat([Buffer.from(`${held(dirFd)}/`), name]), openPath | O_NOFOLLOW);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
}

/**
 * Checks every entry under `dirs` (never following a symlink, wherever it appears), clears the
 * set-id bits of directories and reports set-id files (`complete: false`). Synchronous: `execSync` needs it too, and the walk is bounded by
 * {@link sweepEntryLimit} and {@link sweepDepthLimit}.
 */
export function sweepSetIdFiles(dirs: readonly string[]): SetIdSweep {
  const cleared: string[] = [];
  let entries = 0;
  let unsure = false;

  /** Clears the set-id bits of what `fd` holds; returns its fstat. */
  const check = (fd: number, path: string) => {
    const stat = fstatSync(fd);
    if (stat.isSymbolicLink() || (stat.mode & setIdBits) === 0) return stat;
    // Only directories are changed. A run cannot set these bits itself (seccomp refuses every
    // way), so a set-id file here is a hard link of a file elsewhere or the host's own: changing
    // it could change a host file. Its link count proves nothing (a review raced link and unlink
    // of a host set-uid file past an nlink check: cleared 805 times in 20 000 sweeps). It is
    // left, and the sweep does not say the directories are clean. Directories cannot be hard
    // links, and the kernel sets their set-gid bit by itself (a directory made in a set-gid one).
    if (!stat.isDirectory()) {
      unsure = true;
      return stat;
    }
    chmodSync(held(fd), stat.mode & 0o7777 & ~setIdBits);
    cleared.push(path);
    return stat;
  };

  const walk = (dirFd: number, dirPath: string, depth: number): void => {
    // Raw bytes: decoded as UTF-8, a name that is not would be opened as another (U+FFFD) and
    // skipped as gone, with whatever it holds (found by a review of this sweep).
    // Read a name at a time and stop past the bound: readdirSync read a whole directory before
    // it was counted, so 600 000 names a run left stalled the host 3.5 s (attack review, stop 36).
    const names: Buffer[] = [];
    const listing = opendirSync(held(dirFd), listBytes);
    try {
      for (let entry = listing.readSync(); entry !== null; entry = listing.readSync()) {
        if (++entries > sweepEntryLimit) throw new SweepBound();
        names.push(entry.name as unknown as Buffer);
      }
    } finally {
      listing.closeSync();
    }
    for (const name of names) {
      const path = join(dirPath, name.toString('utf8'));
      const entry = openEntry(dirFd, name);
      // Gone since the listing: it may have moved where the walk has been, so not complete.
      if (entry === undefined) {
        unsure = true;
        continue;
      }
      try {
        if (!check(entry, path).isDirectory()) continue;
        if (depth >= sweepDepthLimit) throw new SweepBound();
        const dir = openSync(held(entry), O_RDONLY | O_DIRECTORY);
        try {
          walk(dir, path, depth + 1);
        } finally {
          closeSync(dir);
        }
      } finally {
        closeSync(entry);
      }
    }
  };

  try {
    for (const root of dirs) {
      const fd = openSync(root, O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
      try {
        check(fd, root);
        walk(fd, root, 1);
      } finally {
        closeSync(fd);
      }
    }
  } catch {
    // A bound reached, an entry that vanished or could not be read: the sweep did not finish.
    return { complete: false, cleared };
  }
  return { complete: !unsure, cleared };
}
