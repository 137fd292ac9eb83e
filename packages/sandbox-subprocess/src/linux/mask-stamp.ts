// Which host objects a sandbox's masks cover. A mask is a mount on the host's dentry (seen
// through a bound system row such as /etc): when the host replaces that path (rename over it,
// unlink and re-create, as an editor or a secret rotation does), the kernel detaches every mount
// on the old dentry, in every mount namespace, and the sandbox then sees the new file unmasked.
// A cold run mounts its masks on what the path is at its start; a pre-started sandbox mounted
// them on what it was at the pre-start. Found by an attack review of the pre-started sandboxes
// (prestart-pool.ts): a hidden file rotated by rename was readable by every later warm run.
import { lstatSync } from 'node:fs';
import { isInside } from './checked-path.ts';
import { defaultFilesystemView } from './filesystem-view.ts';

/** The default view's masks on host file systems (the /proc ones sit on each run's own procfs). */
const defaultMasks = defaultFilesystemView
  .filter((entry) => entry.access === 'masked' && !isInside(entry.path, '/proc'))
  .map((entry) => entry.path);

/**
 * One stamp for the objects at the masked paths: device, inode and change time (nanoseconds) of
 * each, `-` for one that is absent. Replacing, unlinking, re-linking or renaming any of them
 * changes it (a new inode, or a new change time), so a sandbox keyed by it was masked over
 * exactly what the run finds now.
 */
export function maskStamp(hiddenPaths: readonly string[]): string {
  return [...defaultMasks, ...hiddenPaths]
    .map((path) => {
      try {
        // No exception for an absent path (most masks are): building one costs ~15 µs.
        const stat = lstatSync(path, { bigint: true, throwIfNoEntry: false });
        return stat === undefined ? '-' : `${stat.dev}:${stat.ino}:${stat.ctimeNs}`;
      } catch {
        return '-';
      }
    })
    .join(',');
}
