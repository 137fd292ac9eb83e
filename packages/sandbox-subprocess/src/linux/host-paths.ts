// What the view needs to know of the host's paths: whether each exists, and as what. The rows of
// the default view that show the host (/usr, /etc, ...) are system paths that do not change while
// a host runs, so each is looked up once; anything else is looked up every time: hidden paths,
// and the default masks, which appear when the host installs something (/etc/wireguard,
// /etc/docker): looked up once, a mask absent at the first run was never applied for the host's
// lifetime, cold or warm (found by the attack review of the pre-started sandboxes).
import { lstatSync, readlinkSync } from 'node:fs';
import { defaultFilesystemView, type HostPaths } from './filesystem-view.ts';

const systemRows = new Set(
  defaultFilesystemView.filter((entry) => entry.access !== 'masked').map((entry) => entry.path),
);
const cache = new Map<string, ReturnType<HostPaths['kind']>>();

function lookUp(path: string): ReturnType<HostPaths['kind']> {
  try {
    // No exception for an absent path (most masks are, and they are looked up at every run).
    const stat = lstatSync(path, { throwIfNoEntry: false });
    if (stat === undefined) return undefined;
    if (stat.isSymbolicLink()) return { link: readlinkSync(path) };
    return stat.isDirectory() ? 'dir' : 'file';
  } catch {
    return undefined;
  }
}

/** The running host's paths. */
export const hostPaths: HostPaths = {
  kind(path) {
    if (!systemRows.has(path)) return lookUp(path);
    if (!cache.has(path)) cache.set(path, lookUp(path));
    return cache.get(path);
  },
};
