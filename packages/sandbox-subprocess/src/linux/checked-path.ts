// Resolves a path a policy or a call names, refuses one that a planted symlink leads astray, and
// pins what was checked: the path is opened with O_PATH and the descriptor's own link in /proc
// must name the checked location, so a swap between the check and the mount is caught. bwrap
// then binds `/proc/<host pid>/fd/<fd>`, i.e. exactly the object that was checked.
import { closeSync, lstatSync, openSync, readlinkSync, realpathSync } from 'node:fs';
import { dirname, isAbsolute, join, resolve } from 'node:path';
import { SandboxValidationError } from '@coda/sandbox-core';

/** O_PATH (the same value on x86_64 and aarch64): a handle to the inode, no read, no side effects. */
const O_PATH = 0o10000000;

/** A resolved, checked path and the descriptor that pins it (closed by {@link releasePins}). */
export interface CheckedPath {
  readonly real: string;
  readonly fd: number;
  /** What bubblewrap binds: the descriptor seen through the host's /proc. */
  readonly source: string;
}

/** One validation failure for `field`, worded like core's `validate()`. */
export function pathError(field: string, message: string, path: string): SandboxValidationError {
  const received = JSON.stringify(path);
  return new SandboxValidationError(
    `Invalid spawn options: ${field}: ${message} (got ${received})`,
    {
      issues: [{ path: field, message, received }],
    },
  );
}

/** Whether `path` is `dir` or below it (both real, absolute). */
export function isInside(path: string, dir: string): boolean {
  return path === dir || path.startsWith(dir.endsWith('/') ? dir : `${dir}/`);
}

/**
 * The real location of `path`, walking it one component at a time the way the kernel does.
 * A symlink may only lead to a place inside the directory that holds it: `/bin -> usr/bin` and
 * `job/link -> job/real` pass, `job/work -> /etc` or `job/work -> ../other-job` is refused.
 */
export function resolveWithoutEscape(path: string, field: string): string {
  if (!isAbsolute(path)) throw pathError(field, 'expected an absolute path', path);
  let current = '/';
  let hops = 0;
  const pending = path.split('/').filter((part) => part !== '' && part !== '.');
  while (pending.length > 0) {
    const part = pending.shift()!;
    if (part === '..') {
      current = dirname(current);
      continue;
    }
    const next = join(current, part);
    let stat: ReturnType<typeof lstatSync>;
    try {
      stat = lstatSync(next);
    } catch {
      throw pathError(field, 'path does not exist', path);
    }
    if (!stat.isSymbolicLink()) {
      current = next;
      continue;
    }
    if (++hops > 40) throw pathError(field, 'too many symlinks', path);
    let target: string;
    try {
      target = realpathSync(next);
    } catch {
      throw pathError(field, `symlink ${next} is dangling`, path);
    }
    if (!isInside(target, current)) {
      throw pathError(field, `symlink ${next} leads out of ${current} (to ${target})`, path);
    }
    current = target;
  }
  return current;
}

/** The real location of `path`, refused when a symlink leads it astray or `hidden` covers it. */
export function resolveOutsideHidden(
  path: string,
  field: string,
  hidden: readonly string[],
): string {
  const real = resolveWithoutEscape(resolve(path), field);
  const covering = hidden.find((dir) => isInside(real, dir));
  if (covering !== undefined) {
    throw pathError(field, `inside hidePaths entry ${covering}`, path);
  }
  return real;
}

/** Resolves, checks against `hidden` (real paths) and pins `path`. */
export function checkPath(path: string, field: string, hidden: readonly string[]): CheckedPath {
  const real = resolveOutsideHidden(path, field, hidden);
  const fd = openSync(real, O_PATH);
  let pinned: string | undefined;
  try {
    pinned = readlinkSync(`/proc/self/fd/${fd}`);
  } catch {
    pinned = undefined;
  }
  if (pinned !== real) {
    closeSync(fd);
    throw pathError(field, 'changed while it was being checked', path);
  }
  return { real, fd, source: `/proc/${process.pid}/fd/${fd}` };
}

/** Closes the descriptors of checked paths; each exactly once. */
export function releasePins(paths: readonly CheckedPath[]): void {
  for (const path of paths) {
    try {
      closeSync(path.fd);
    } catch {
      // Never opened twice, so never closed twice: only a host that closed it behind us lands here.
    }
  }
}
