// The Landlock rules of one run, built from the same view data as bubblewrap's mounts
// (filesystem-view.ts): a read-only row grants read and execute beneath it, a writable addition
// every right, and nothing else is granted. Landlock cannot mount over a path, so a masked path
// inside a readable tree is left out instead: the tree is granted child by child around it.
// What cannot be expressed (a private /tmp, masks inside the live /proc) is listed in
// `unenforced` and in docs/subprocess.md.
import { readdirSync } from 'node:fs';
import { isInside } from '../checked-path.ts';
import type { HostPaths, ViewAdditions, ViewEntry } from '../filesystem-view.ts';
import { FsAccess, handledFsRights, NetAccess, readRights, tcpAbi } from './landlock-abi.ts';

/** One rule: `access` granted beneath `path` (or on it, for a file). */
export interface PathRule {
  readonly path: string;
  readonly access: number;
}

/** One rule: `access` granted for TCP port `port`. */
export interface PortRule {
  readonly port: number;
  readonly access: number;
}

/** Host facts the rules depend on, besides existence: a directory's entries. */
export interface TreeHost extends HostPaths {
  /** Names and kinds of the entries of directory `path`. */
  entries(path: string): readonly { readonly name: string; readonly symlink: boolean }[];
  /** Whether the view's rules may be kept for later runs (the real host; not a test's tree). */
  readonly cacheable?: boolean;
}

/** The running host's directories, as `host` reports them. */
export const treeHost = (host: HostPaths, cacheable = false): TreeHost => ({
  cacheable,
  kind: (path) => host.kind(path),
  entries: (path) => {
    try {
      return readdirSync(path, { withFileTypes: true }).map((entry) => ({
        name: entry.name,
        symlink: entry.isSymbolicLink(),
      }));
    } catch {
      return [];
    }
  },
});

/** Device nodes of bubblewrap's minimal /dev that a Landlock run may open (read and write). */
export const landlockDevices: readonly string[] = Object.freeze([
  '/dev/null',
  '/dev/zero',
  '/dev/full',
  '/dev/random',
  '/dev/urandom',
  '/dev/tty',
]);

/**
 * The view's own rules, per view, ABI and hidden paths: its rows are system paths that do not
 * change while a host runs (as host-paths.ts assumes), and expanding /etc around its masks
 * lists a directory of a hundred or more entries, which every run would otherwise repeat.
 */
const viewRulesCache = new WeakMap<readonly ViewEntry[], Map<string, readonly PathRule[]>>();

/** The file-system rules for a view, its run's additions and hidden paths. */
export function filesystemRules(
  view: readonly ViewEntry[],
  additions: ViewAdditions,
  abi: number,
  host: TreeHost,
): PathRule[] {
  const all = handledFsRights(abi);
  const masks = viewMasks(view, additions.hidden);
  const rules = [...cachedViewRules(view, masks, abi, host)];
  for (const bound of additions.readOnly) rules.push(...readTree(bound.path, masks, host));
  for (const bound of additions.writable) rules.push({ path: bound.path, access: all });
  return rules;
}

function cachedViewRules(
  view: readonly ViewEntry[],
  masks: readonly string[],
  abi: number,
  host: TreeHost,
): readonly PathRule[] {
  if (host.cacheable !== true) return viewRules(view, masks, abi, host);
  let perView = viewRulesCache.get(view);
  if (perView === undefined) {
    perView = new Map();
    viewRulesCache.set(view, perView);
  }
  const key = JSON.stringify([abi, masks]);
  let rules = perView.get(key);
  if (rules === undefined) {
    rules = Object.freeze(viewRules(view, masks, abi, host));
    perView.set(key, rules);
  }
  return rules;
}

/** The paths left out: the view's masks and the run's hidden paths, but those inside /proc. */
function viewMasks(view: readonly ViewEntry[], hidden: readonly string[]): string[] {
  // Masks inside the live /proc cannot be honoured: its pid directories come and go, so it is
  // granted whole (docs/subprocess.md says so).
  const proc = view.find((entry) => entry.access === 'fresh-proc')?.path;
  return [
    ...view.filter((entry) => entry.access === 'masked').map((entry) => entry.path),
    ...hidden,
  ].filter((path) => proc === undefined || !isInside(path, proc));
}

function viewRules(
  view: readonly ViewEntry[],
  masks: readonly string[],
  abi: number,
  host: TreeHost,
): PathRule[] {
  const all = handledFsRights(abi);
  const proc = view.find((entry) => entry.access === 'fresh-proc')?.path;
  const rules: PathRule[] = [];
  for (const entry of view) {
    if (entry.access === 'read-only') {
      if (proc !== undefined && isInside(entry.path, proc)) continue; // inside /proc, granted below
      rules.push(...readTree(entry.path, masks, host));
    } else if (entry.access === 'minimal-dev') {
      const device = FsAccess.readFile | FsAccess.writeFile | FsAccess.truncate | FsAccess.ioctlDev;
      for (const path of landlockDevices) rules.push({ path, access: device & all });
    } else if (entry.access === 'fresh-proc') {
      rules.push({ path: entry.path, access: readRights });
    }
    // 'private' rows (HOME, /tmp, /dev/shm) have no Landlock equivalent: nothing is granted.
  }
  return rules;
}

/** Read rules for the tree at `path`, leaving out every path in `masks` inside it. */
function readTree(path: string, masks: readonly string[], host: TreeHost): PathRule[] {
  if (host.kind(path) === undefined) return [];
  if (masks.some((mask) => isInside(path, mask))) return [];
  const inside = masks.filter((mask) => isInside(mask, path));
  if (inside.length === 0) return [{ path, access: readRights }];
  // The directory may be listed (names of masked entries included, never their contents);
  // every entry but the masked ones is granted. A symlink needs no rule: Landlock checks
  // the file it leads to, which a rule of its own must grant.
  const rules: PathRule[] = [{ path, access: FsAccess.readDir }];
  for (const entry of host.entries(path)) {
    if (entry.symlink) continue;
    rules.push(...readTree(`${path === '/' ? '' : path}/${entry.name}`, inside, host));
  }
  return rules;
}

/** What Landlock does about TCP in one run: the rights it handles and the ports it grants. */
export interface NetworkRules {
  readonly handled: number;
  readonly ports: readonly PortRule[];
}

/** A run's network, as the Landlock rules see it. */
export type LandlockNetwork =
  /** No network: every TCP bind and connect refused (seccomp refuses inet sockets too). */
  | { readonly kind: 'off' }
  /** The host's network, unconfined. */
  | { readonly kind: 'on' }
  /** A network allowlist: TCP connect to the egress proxy's loopback port only. */
  | { readonly kind: 'proxy'; readonly port: number };

/**
 * The one place that decides TCP for a Landlock run (ABI 4 or later; before it TCP cannot be
 * handled). Off: bind and connect are both handled and no port is granted, so every TCP bind
 * and connect fails with EACCES. On: TCP is not handled. Proxy: both handled, connect granted
 * for the proxy's port alone. Landlock's rules are per port, not per address: a connect to
 * another address on that port is let through (docs/security.md), and so are the bypasses the
 * seccomp filter's `tcpClientOnly` closes (listen's implicit bind, TCP Fast Open).
 */
export function networkRules(network: LandlockNetwork, abi: number): NetworkRules {
  if (network.kind === 'on' || abi < tcpAbi) {
    if (network.kind === 'proxy') throw new RangeError(`TCP rules need Landlock ABI ${tcpAbi}`);
    return { handled: 0, ports: [] };
  }
  const handled = NetAccess.bindTcp | NetAccess.connectTcp;
  if (network.kind === 'off') return { handled, ports: [] };
  return { handled, ports: [{ port: network.port, access: NetAccess.connectTcp }] };
}
