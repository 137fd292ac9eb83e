// What a run adds to the view (its writable directory, cwd, program, read-only paths and allowed
// sockets), checked against the identity it runs as: shared by the bubblewrap and Landlock
// backends, so both see the same paths refused for the same reasons.
import { type Stats, statSync } from 'node:fs';
import { dirname } from 'node:path';
import type { LaunchRequest } from '../process/launch-plan.ts';
import { type CheckedPath, isInside, pathError } from './checked-path.ts';
import { defaultFilesystemView, type ViewAdditions } from './filesystem-view.ts';
import type { Identity } from './linux-plan.ts';
import { viewAdditions, type WantedPath } from './view-additions.ts';

/**
 * The run's additions, each pinned into `pins`; `bySource` binds pinned descriptors rather than
 * checked names. `throughParents`: the command reaches each path through its real parent
 * directories (Landlock; bubblewrap mounts it in directories of its own), so each parent must be
 * searchable by the identity. Throws `SandboxValidationError` naming the field of a path the
 * run's identity could not use or that would expose the whole host.
 */
export function runAdditions(
  request: LaunchRequest,
  identity: Identity,
  pins: CheckedPath[],
  bySource: boolean,
  throughParents = false,
): ViewAdditions {
  const writableFields: (readonly [string, string])[] = [
    ...(request.writableDirectory === undefined
      ? []
      : [[request.writableField ?? 'cwd', request.writableDirectory] as const]),
    ...request.writablePaths,
  ];
  for (const [field, path] of writableFields) {
    if (identity.kind === 'drop' && !writableBy(path, identity)) {
      throw pathError(
        field,
        `not writable by the sandbox identity ${identity.uid}:${identity.gid} (chown it, or set runAs)`,
        path,
      );
    }
  }
  for (const [field, path] of [
    ...(request.cwd === undefined ? [] : [['cwd', request.cwd] as const]),
    ...request.readOnlyPaths,
  ]) {
    if (path === '/') throw pathError(field, 'binding / would show the whole host', '/');
    // bwrap (root) can bind what the dropped identity cannot open; say so now rather than let the
    // command fail inside with EACCES or, for a Node child, a MODULE_NOT_FOUND.
    if (identity.kind === 'drop' && !readableBy(path, identity)) {
      throw pathError(
        field,
        `not readable by the sandbox identity ${identity.uid}:${identity.gid} (make it readable by others, or set runAs)`,
        path,
      );
    }
  }
  if (throughParents && identity.kind === 'drop') {
    for (const [field, path] of [
      ...writableFields,
      ...(request.cwd === undefined ? [] : [['cwd', request.cwd] as const]),
      ['file', request.executable] as const,
      ...request.readOnlyPaths,
    ]) {
      const closed = closedParent(path, identity);
      if (closed === undefined) continue;
      throw pathError(
        field,
        `${closed} on its way is not searchable by the sandbox identity ${identity.uid}:${identity.gid} (under Landlock a path is reached through its real parents: make them searchable, or set runAs)`,
        path,
      );
    }
  }
  const wanted: WantedPath[] = [
    ...writableFields.map(([field, path]) => ({ field, path, writable: true, implicit: false })),
    ...(request.cwd === undefined
      ? []
      : [{ field: 'cwd', path: request.cwd, writable: false, implicit: true }]),
    { field: 'file', path: request.executable, writable: false, implicit: true },
    ...[...request.readOnlyPaths, ...request.unixSockets].map(([field, path]) => ({
      field,
      path,
      writable: false,
      implicit: false,
    })),
  ];
  return viewAdditions(wanted, request.hiddenPaths, pins, bySource, { rowOf: systemRowOf });
}

/** The default view's read-only row that shows `path` (the last row over it decides). */
function systemRowOf(path: string): string | undefined {
  let row: string | undefined;
  for (const entry of defaultFilesystemView) {
    if (!isInside(path, entry.path)) continue;
    row = entry.access === 'read-only' ? entry.path : undefined;
  }
  return row;
}

/** The first parent directory of `path` that `identity` may not search, if any. */
function closedParent(path: string, identity: { uid: number; gid: number }): string | undefined {
  for (let dir = dirname(path); ; dir = dirname(dir)) {
    if (!hasPermission(statSync(dir), identity, 0o1)) return dir;
    if (dir === '/') return undefined;
  }
}

/** Whether `identity` may create files in `dir` (write and search permission). */
function writableBy(dir: string, identity: { uid: number; gid: number }): boolean {
  return hasPermission(statSync(dir), identity, 0o3);
}

/** Whether `identity` may read `path` (and search it, for a directory). Its parents do not
 * matter: inside the view they are bwrap's own directories. */
function readableBy(path: string, identity: { uid: number; gid: number }): boolean {
  const stats = statSync(path);
  return hasPermission(stats, identity, stats.isDirectory() ? 0o5 : 0o4);
}

/** Whether the owner, group or other bits that apply to `identity` (no supplementary groups:
 * setpriv clears them) hold every bit of `wanted`. */
function hasPermission(
  { uid, gid, mode }: Stats,
  identity: { uid: number; gid: number },
  wanted: number,
): boolean {
  const bits = uid === identity.uid ? mode >> 6 : gid === identity.gid ? mode >> 3 : mode;
  return (bits & wanted) === wanted;
}
