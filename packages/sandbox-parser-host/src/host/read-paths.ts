// What a runner child may read, resolved and checked once, when the host is created. Node's
// permission model compares the path a parser names, as written (only `.` and `..` resolved),
// with the allowed paths, and then the kernel follows whatever symlinks the path holds. So:
//
// - every allowed path goes to `--allow-fs-read` as its real location;
// - the module must really live in its (real) directory, and a path in `allowRead` must not
//   pass through a symlink that leads out of the directory that holds the link;
// - the readable directories are searched for symlinks a parser could read through: each must
//   lead inside a readable path, and one to a directory must not lead above its own level,
//   where `link/../..` would climb out while the path as written stays inside.
import { type Dirent, lstatSync, readdirSync, readlinkSync, realpathSync, statSync } from 'node:fs';
import { dirname, isAbsolute, join, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { SandboxValidationError, type ValidationIssue } from '@coda/sandbox-core';

/** Entries searched for symlinks, over all readable directories of one host. */
export const maxCheckedEntries = 50_000;

/** The kernel's own limit on symlinks in one path (ELOOP). */
const maxLinkHops = 40;

/** The parser module and the paths its children may read, all real. */
export interface ReadablePaths {
  /** The module's real path (Node's loader reads it there). */
  modulePath: string;
  /** The module's real directory (with a trailing slash), then each `allowRead` real path. */
  readPaths: string[];
}

class PathProblem extends Error {}

/** Whether `path` is `dir` or below it (both absolute and normalised). */
export function isInside(path: string, dir: string): boolean {
  return path === dir || path.startsWith(dir.endsWith(sep) ? dir : `${dir}${sep}`);
}

function depthOf(path: string): number {
  return path.split(sep).filter(Boolean).length;
}

/**
 * Walks `parts` from the real directory `start` one component at a time, as the kernel does,
 * and returns the real location. A symlink on the way must lead inside the directory that
 * holds it (`/bin -> usr/bin`, `data/current -> v2` pass; `data/current -> /etc` does not).
 */
function walk(start: string, parts: readonly string[], hops: { count: number }): string {
  let current = start;
  for (const part of parts) {
    if (part === '' || part === '.') continue;
    if (part === '..') {
      current = dirname(current);
      continue;
    }
    const next = join(current, part);
    let isLink: boolean;
    try {
      isLink = lstatSync(next).isSymbolicLink();
    } catch {
      throw new PathProblem(`no such file or directory ${next}`);
    }
    if (!isLink) {
      current = next;
      continue;
    }
    if (++hops.count > maxLinkHops) throw new PathProblem(`too many symlinks in ${next}`);
    const target = readlinkSync(next);
    const real = walk(isAbsolute(target) ? sep : current, target.split(sep), hops);
    if (!isInside(real, current)) {
      throw new PathProblem(
        `${next} is a symlink to ${real}, outside ${current}, the directory that holds it`,
      );
    }
    current = real;
  }
  return current;
}

/** The real location of an `allowRead` path; throws a {@link PathProblem} naming a bad link. */
function resolveReadPath(path: string): string {
  return walk(sep, resolve(path).split(sep), { count: 0 });
}

/** The module's real path and real directory, or the problem with it. */
function resolveModule(module: string | URL): { modulePath: string; moduleDir: string } {
  const path =
    module instanceof URL || module.startsWith('file:') ? fileURLToPath(module) : resolve(module);
  let isFile = false;
  try {
    isFile = statSync(path).isFile();
  } catch {}
  if (!isFile) throw new PathProblem(`no such file ${path}`);
  const moduleDir = realpathSync(dirname(path));
  const modulePath = realpathSync(path);
  if (!isInside(modulePath, moduleDir)) {
    throw new PathProblem(
      `${path} is a symlink to ${modulePath}, outside its directory ${moduleDir}`,
    );
  }
  return { modulePath, moduleDir };
}

/**
 * How deep `path` lies below the outermost of `roots` that holds it; -1 when none does. A path
 * as written may climb with `..` that many levels and stay readable.
 */
function depthInside(path: string, roots: readonly string[]): number {
  let deepest = -1;
  for (const root of roots) {
    if (isInside(path, root)) deepest = Math.max(deepest, depthOf(path) - depthOf(root));
  }
  return deepest;
}

/**
 * Searches the directory `root` for a symlink a parser could read through to a place it may not
 * read; returns the first one found. `budget` counts the entries left to search.
 */
function findEscapingLink(
  root: string,
  roots: readonly string[],
  budget: { left: number },
): string | undefined {
  const pending = [root];
  while (pending.length > 0) {
    const dir = pending.pop() as string;
    let entries: Dirent[];
    try {
      entries = readdirSync(dir, { withFileTypes: true });
    } catch {
      // Not readable by this process, so not by a child of the same user either.
      continue;
    }
    for (const entry of entries) {
      if (--budget.left < 0) {
        return `${root} holds more than ${maxCheckedEntries} entries to check for symlinks; name a smaller directory`;
      }
      const path = join(dir, entry.name);
      if (entry.isDirectory()) pending.push(path);
      if (!entry.isSymbolicLink()) continue;
      let real: string;
      try {
        real = realpathSync(path);
      } catch {
        // A link to nothing: harmless unless what it names could appear outside.
        const named = resolve(dir, readlinkSync(path));
        if (depthInside(named, roots) >= 0) continue;
        return `${path} is a symlink to ${named}, outside the readable paths`;
      }
      const targetDepth = depthInside(real, roots);
      if (targetDepth < 0) return `${path} is a symlink to ${real}, outside the readable paths`;
      let isDirectory = false;
      try {
        isDirectory = statSync(real).isDirectory();
      } catch {}
      if (isDirectory && targetDepth < depthInside(path, roots)) {
        return `${path} is a symlink to ${real}, a directory above the link's own level (a path through it and .. would lead out of the readable paths)`;
      }
    }
  }
  return undefined;
}

/**
 * Resolves the module and `allowRead` to the real paths a child may read, or throws one
 * `SandboxValidationError` naming each option (`module`, `allowRead.N`) that is refused.
 */
export function resolveReadablePaths(
  module: string | URL,
  allowRead: readonly string[],
): ReadablePaths {
  const issues: ValidationIssue[] = [];
  const problem = (path: string, error: unknown, given: unknown): void => {
    if (!(error instanceof PathProblem)) throw error;
    issues.push({ path, message: error.message, received: JSON.stringify(String(given)) });
  };
  let resolved: { modulePath: string; moduleDir: string } | undefined;
  try {
    resolved = resolveModule(module);
  } catch (error) {
    problem('module', error, module instanceof URL ? module.href : module);
  }
  const readPaths: { field: string; real: string }[] = [];
  if (resolved !== undefined) readPaths.push({ field: 'module', real: resolved.moduleDir });
  allowRead.forEach((path, index) => {
    try {
      readPaths.push({ field: `allowRead.${index}`, real: resolveReadPath(path) });
    } catch (error) {
      problem(`allowRead.${index}`, error, path);
    }
  });
  if (issues.length === 0) {
    const roots = readPaths.map(({ real }) => real);
    const budget = { left: maxCheckedEntries };
    for (const { field, real } of readPaths) {
      if (!statSync(real).isDirectory()) continue;
      const found = findEscapingLink(real, roots, budget);
      if (found !== undefined) {
        const given = field === 'module' ? module : allowRead[Number(field.split('.')[1])];
        problem(field, new PathProblem(found), given instanceof URL ? given.href : given);
      }
    }
  }
  if (issues.length > 0 || resolved === undefined) {
    const list = issues.map((issue) => `${issue.path}: ${issue.message}`).join('; ');
    throw new SandboxValidationError(`Invalid parser host options: ${list}`, { issues });
  }
  const { modulePath, moduleDir } = resolved;
  return {
    modulePath,
    // The trailing separator: the directory's contents (Node matches whole path components).
    readPaths: [
      moduleDir.endsWith(sep) ? moduleDir : `${moduleDir}${sep}`,
      ...readPaths.slice(1).map(({ real }) => real),
    ],
  };
}
