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
//
// The walk is one generator of file-system steps, run by a synchronous driver (execSync) or an
// asynchronous one (run and spawn: each step on libuv's thread pool). Found by an attack review
// (stop 36): synchronous on the host's thread, a walk of 49 990 entries stalled the host's event
// loop 0.9 s after every run on a directory a run had filled, and a directory was read whole
// before its entries were counted (600 000 names: 3.5 s).
import {
  type BigIntStats,
  chmod,
  chmodSync,
  close,
  closeSync,
  constants,
  type Dir,
  fstat,
  fstatSync,
  type OpenDirOptions,
  open,
  opendir,
  opendirSync,
  openSync,
  type Stats,
} from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';

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

/** The walk stopped at a bound; the sweep is incomplete. */
class SweepBound extends Error {}

/** The path the kernel resolves to the object a descriptor holds, never by name again. */
const held = (fd: number): string => `/proc/self/fd/${fd}`;

/** Names as bytes (Node takes 'buffer' here; its types list only string encodings). */
const listBytes = { encoding: 'buffer', bufferSize: 1024 } as unknown as OpenDirOptions;

/** One file-system step of the walk; the driver answers each with its result or its error. */
type Step =
  | { readonly kind: 'open'; readonly path: string | Buffer; readonly flags: number }
  | { readonly kind: 'fstat'; readonly fd: number }
  | { readonly kind: 'chmod'; readonly path: string; readonly mode: number }
  | { readonly kind: 'close'; readonly fd: number }
  /** Up to `max` + 1 names of a directory (one more than `max` means: over the bound). */
  | { readonly kind: 'list'; readonly path: string; readonly max: number };

type Walk = Generator<Step, SetIdSweep, unknown>;

/** Opens `name` (bytes as listed) in the directory `dirFd` holds, without following it. */
function* openEntry(dirFd: number, name: Buffer): Generator<Step, number | undefined, unknown> {
  try {
    const path = Buffer.concat([Buffer.from(`${held(dirFd)}/`), name]);
    return (yield { kind: 'open', path, flags: openPath | O_NOFOLLOW }) as number;
  } catch (error) {
    // Gone: a run sharing the directory may still run.
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
}

/**
 * The walk: checks every entry under `dirs` (never following a symlink, wherever it appears),
 * clears the set-id bits of directories and reports set-id files (`complete: false`).
 */
function* walkSetIdFiles(dirs: readonly string[]): Walk {
  const cleared: string[] = [];
  let entries = 0;
  let unsure = false;

  /** Clears the set-id bits of what `fd` holds; returns whether it is a directory. */
  function* check(fd: number, path: string): Generator<Step, boolean, unknown> {
    const stat = (yield { kind: 'fstat', fd }) as Stats;
    if (stat.isSymbolicLink() || (stat.mode & setIdBits) === 0) return stat.isDirectory();
    if (!stat.isDirectory()) {
      unsure = true;
      return false;
    }
    yield { kind: 'chmod', path: held(fd), mode: stat.mode & 0o7777 & ~setIdBits };
    cleared.push(path);
    return true;
  }

  function* walk(dirFd: number, dirPath: string, depth: number): Generator<Step, void, unknown> {
    // Never more names than the bound leaves: readdirSync read a whole directory first.
    const max = sweepEntryLimit - entries;
    const names = (yield { kind: 'list', path: held(dirFd), max }) as Buffer[];
    entries += names.length;
    if (entries > sweepEntryLimit) throw new SweepBound();
    for (const name of names) {
      const path = join(dirPath, name.toString('utf8'));
      const entry = yield* openEntry(dirFd, name);
      if (entry === undefined) {
        unsure = true;
        continue;
      }
      try {
        if (!(yield* check(entry, path))) continue;
        if (depth >= sweepDepthLimit) throw new SweepBound();
        const dir = (yield {
          kind: 'open',
          path: held(entry),
          flags: O_RDONLY | O_DIRECTORY,
        }) as number;
        try {
          yield* walk(dir, path, depth + 1);
        } finally {
          yield { kind: 'close', fd: dir };
        }
      } finally {
        yield { kind: 'close', fd: entry };
      }
    }
  }

  try {
    for (const root of dirs) {
      const fd = (yield {
        kind: 'open',
        path: root,
        flags: O_RDONLY | O_DIRECTORY | O_NOFOLLOW,
      }) as number;
      try {
        yield* check(fd, root);
        yield* walk(fd, root, 1);
      } finally {
        yield { kind: 'close', fd };
      }
    }
  } catch {
    return { complete: false, cleared };
  }
  return { complete: !unsure, cleared };
}

/** Runs `walk`, answering each step with `perform`'s result or throwing its error into it. */
function drive(walk: Walk, perform: (step: Step) => unknown): SetIdSweep {
  let next = walk.next();
  while (!next.done) {
    let result: unknown;
    let failed = false;
    try {
      result = perform(next.value);
    } catch (error) {
      failed = true;
      result = error;
    }
    next = failed ? walk.throw(result) : walk.next(result);
  }
  return next.value;
}

/** The same, each step awaited. */
async function driveAsync(
  walk: Walk,
  perform: (step: Step) => Promise<unknown>,
): Promise<SetIdSweep> {
  let next = walk.next();
  while (!next.done) {
    let result: unknown;
    let failed = false;
    try {
      result = await perform(next.value);
    } catch (error) {
      failed = true;
      result = error;
    }
    next = failed ? walk.throw(result) : walk.next(result);
  }
  return next.value;
}

function listSync(path: string, max: number): Buffer[] {
  const names: Buffer[] = [];
  const listing = opendirSync(path, listBytes);
  try {
    for (let entry = listing.readSync(); entry !== null; entry = listing.readSync()) {
      names.push(entry.name as unknown as Buffer);
      if (names.length > max) break;
    }
  } finally {
    listing.closeSync();
  }
  return names;
}

async function listAsync(path: string, max: number): Promise<Buffer[]> {
  const names: Buffer[] = [];
  const listing: Dir = await promisify(opendir)(path, listBytes);
  try {
    for (let entry = await listing.read(); entry !== null; entry = await listing.read()) {
      names.push(entry.name as unknown as Buffer);
      if (names.length > max) break;
    }
  } finally {
    await listing.close();
  }
  return names;
}

function performSync(step: Step): unknown {
  switch (step.kind) {
    case 'open':
      return openSync(step.path, step.flags);
    case 'fstat':
      return fstatSync(step.fd);
    case 'chmod':
      return chmodSync(step.path, step.mode);
    case 'close':
      return closeSync(step.fd);
    case 'list':
      return listSync(step.path, step.max);
  }
}

const openAsync = promisify(open);
const fstatAsync = promisify(fstat) as (fd: number) => Promise<Stats | BigIntStats>;
const chmodAsync = promisify(chmod);
const closeAsync = promisify(close);

function performAsync(step: Step): Promise<unknown> {
  switch (step.kind) {
    case 'open':
      return openAsync(step.path, step.flags);
    case 'fstat':
      return fstatAsync(step.fd);
    case 'chmod':
      return chmodAsync(step.path, step.mode);
    case 'close':
      return closeAsync(step.fd);
    case 'list':
      return listAsync(step.path, step.max);
  }
}

/**
 * Sweeps `dirs` synchronously (execSync, which blocks anyway). Bounded by
 * {@link sweepEntryLimit} and {@link sweepDepthLimit}.
 */
export function sweepSetIdFiles(dirs: readonly string[]): SetIdSweep {
  return drive(walkSetIdFiles(dirs), performSync);
}

/** Sweeps `dirs` with every step on libuv's thread pool: the host's event loop keeps running. */
export function sweepSetIdFilesAsync(dirs: readonly string[]): Promise<SetIdSweep> {
  return driveAsync(walkSetIdFiles(dirs), performAsync);
}
