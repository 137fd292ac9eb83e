// The file system a confined command sees on Linux, declared as data: an allowlist in the spirit
// of runc's `readonlyPaths` / `maskedPaths`. Nothing of the host is visible unless a row here
// (or the run's policy) names it; bubblewrap starts from an empty tmpfs root.

/** How one path of the view is provided. */
export type ViewAccess =
  /** The host path, bind-mounted read-only (a host symlink stays a symlink), if it exists. */
  | 'read-only'
  /** Hidden behind an empty read-only directory or `/dev/null`, if it exists on the host. */
  | 'masked'
  /** A fresh tmpfs private to the run: writable when writes are allowed, else read-only. */
  | 'private'
  /** bubblewrap's minimal /dev: null, zero, full, random, urandom, tty, pts, ptmx, shm. */
  | 'minimal-dev'
  /** A fresh procfs of the run's own pid namespace. */
  | 'fresh-proc';

/** One row of the view. */
export interface ViewEntry {
  readonly path: string;
  readonly access: ViewAccess;
  /** Why the row exists (shown in the docs table). */
  readonly why: string;
}

/** The private home directory commands get as `HOME` (and as the cwd when none is named). */
export const sandboxHome = '/home/sandbox';

const system = (path: string, why: string): ViewEntry => ({ path, access: 'read-only', why });
const masked = (path: string, why: string): ViewEntry => ({ path, access: 'masked', why });

/**
 * The default view, in mount order (later rows cover earlier ones). What is not here is absent:
 * `/root`, `/home` (but for the private home), `/run`, `/var`, `/mnt`, `/media`, `/srv`, `/opt`,
 * `/sys`, `/boot` and the host's cwd.
 */
export const defaultFilesystemView: readonly ViewEntry[] = Object.freeze([
  system('/usr', 'programs and libraries'),
  system('/bin', 'programs (a link to usr/bin on merged-usr systems)'),
  system('/sbin', 'programs (a link to usr/sbin on merged-usr systems)'),
  system('/lib', 'libraries and the dynamic loader'),
  system('/lib32', 'libraries'),
  system('/lib64', 'the dynamic loader'),
  system('/libx32', 'libraries'),
  system('/etc', 'configuration: passwd, resolver, locale, CA certificates'),
  masked('/etc/shadow', 'password hashes'),
  masked('/etc/shadow-', 'password hashes (backup)'),
  masked('/etc/gshadow', 'group password hashes'),
  masked('/etc/gshadow-', 'group password hashes (backup)'),
  masked('/etc/security/opasswd', 'old password hashes'),
  masked('/etc/sudoers', 'privilege rules'),
  masked('/etc/sudoers.d', 'privilege rules'),
  masked('/etc/ssh', 'SSH host keys'),
  masked('/etc/ssl/private', 'TLS private keys'),
  masked('/etc/pki/tls/private', 'TLS private keys (Red Hat layout)'),
  masked('/etc/letsencrypt', 'TLS certificates and keys'),
  masked('/etc/krb5.keytab', 'Kerberos keys'),
  masked('/etc/ipsec.secrets', 'VPN secrets'),
  masked('/etc/wireguard', 'VPN keys'),
  masked('/etc/NetworkManager/system-connections', 'Wi-Fi and VPN passwords'),
  masked('/etc/credstore', 'systemd credentials'),
  masked('/etc/credstore.encrypted', 'systemd credentials'),
  masked('/etc/docker', 'container engine credentials'),
  masked('/etc/kubernetes', 'cluster credentials'),
  masked('/etc/machine-id', 'a stable host identifier'),
  { path: sandboxHome, access: 'private', why: 'HOME: empty, private to the run' },
  { path: '/tmp', access: 'private', why: 'private to the run' },
  { path: '/dev', access: 'minimal-dev', why: 'device nodes a program expects' },
  { path: '/dev/shm', access: 'private', why: 'POSIX shared memory, private to the run' },
  { path: '/proc', access: 'fresh-proc', why: 'the run’s own processes only' },
  system('/proc/sys', 'kernel settings: readable, never writable'),
  system('/proc/sysrq-trigger', 'magic SysRq'),
  system('/proc/irq', 'interrupt affinity'),
  system('/proc/bus', 'bus devices'),
  system('/proc/fs', 'file system settings'),
  masked('/proc/kcore', 'kernel memory'),
  masked('/proc/keys', 'the kernel key store'),
  masked('/proc/timer_list', 'kernel timers (address leaks)'),
  masked('/proc/timer_stats', 'kernel timers'),
  masked('/proc/sched_debug', 'scheduler state of every host process'),
  masked('/proc/latency_stats', 'kernel latency figures'),
  masked('/proc/kallsyms', 'kernel symbol addresses'),
  masked('/proc/interrupts', 'host interrupt counters'),
  masked('/proc/acpi', 'ACPI controls'),
  masked('/proc/asound', 'sound devices'),
  masked('/proc/scsi', 'SCSI controls'),
]);

/** What a run adds to the view (all paths resolved and checked by the caller). */
export interface ViewAdditions {
  /** Bound read-only: the program, a named cwd, `readOnlyPaths`, allowed sockets. */
  readonly readOnly: readonly BoundPath[];
  /** Bound writable: `restrictToDirectory` (or the named cwd) and `writablePaths`. */
  readonly writable: readonly BoundPath[];
  /** `hidePaths`, masked last so that nothing the run adds re-exposes them. */
  readonly hidden: readonly string[];
}

/** A host path to bind: `source` is what bubblewrap opens (a `/proc/PID/fd/N` link), `path` where. */
export interface BoundPath {
  readonly source: string;
  readonly path: string;
}

/** Host facts the view depends on: which paths exist, which are symlinks, which are directories. */
export interface HostPaths {
  /** The link target when `path` is a symlink, `'dir'` or `'file'` when it exists, else undefined. */
  kind(path: string): { readonly link: string } | 'dir' | 'file' | undefined;
}

/**
 * bubblewrap arguments for the view: `writable` decides whether the private rows are writable,
 * `tmpfsBytes` bounds each private tmpfs.
 * Order matters: bubblewrap applies the arguments in sequence, so additions come after the
 * defaults and hidden paths after the additions.
 */
export function viewArguments(
  view: readonly ViewEntry[],
  additions: ViewAdditions,
  writable: boolean,
  host: HostPaths,
  tmpfsBytes: number,
): string[] {
  const args: string[] = [];
  const readOnlyMounts: string[] = [];
  const mask = (path: string): void => {
    const kind = host.kind(path);
    if (kind === undefined) return;
    if (kind === 'dir') {
      args.push('--perms', '0755', '--tmpfs', path);
      readOnlyMounts.push(path);
    } else {
      // A symlink or file is covered by /dev/null; a masked symlink must not be followed.
      args.push('--ro-bind', '/dev/null', path);
    }
  };
  for (const entry of view) {
    switch (entry.access) {
      case 'read-only': {
        const kind = host.kind(entry.path);
        if (kind === undefined) break;
        if (typeof kind === 'object') args.push('--symlink', kind.link, entry.path);
        else args.push('--ro-bind', entry.path, entry.path);
        break;
      }
      case 'masked':
        mask(entry.path);
        break;
      case 'private':
        // 1777 like /tmp: the run's identity may be any uid, and nobody else shares the tmpfs.
        args.push('--size', String(tmpfsBytes), '--perms', '1777', '--tmpfs', entry.path);
        if (!writable) readOnlyMounts.push(entry.path);
        break;
      case 'minimal-dev':
        args.push('--dev', entry.path);
        readOnlyMounts.push(entry.path);
        break;
      case 'fresh-proc':
        args.push('--proc', entry.path);
        break;
    }
  }
  // bubblewrap would create the parents of an added path as 0700 root directories, which the
  // run's identity could not traverse: create them 0755 (outside the read-only system rows).
  const systemRows = view.filter((entry) => entry.access === 'read-only').map((e) => e.path);
  const parents = new Set<string>();
  for (const { path } of [...additions.writable, ...additions.readOnly]) {
    for (let dir = parentOf(path); dir !== '/'; dir = parentOf(dir)) {
      if (systemRows.some((row) => dir === row || dir.startsWith(`${row}/`))) break;
      parents.add(dir);
    }
  }
  for (const dir of [...parents].sort((a, b) => a.length - b.length)) {
    args.push('--perms', '0755', '--dir', dir);
  }
  for (const bound of additions.writable) args.push('--bind', bound.source, bound.path);
  for (const bound of additions.readOnly) args.push('--ro-bind', bound.source, bound.path);
  for (const path of additions.hidden) mask(path);
  // Remounts last: a remount before a later mount below it would not cover that mount.
  for (const path of readOnlyMounts) args.push('--remount-ro', path);
  return args;
}

function parentOf(path: string): string {
  const index = path.lastIndexOf('/');
  return index <= 0 ? '/' : path.slice(0, index);
}

/** The view as a Markdown table (docs/subprocess.md is generated from this). */
export function viewTable(view: readonly ViewEntry[] = defaultFilesystemView): string {
  const words: Record<ViewAccess, string> = {
    'read-only': 'read-only (if present)',
    masked: 'masked (if present)',
    private: 'private tmpfs (read-only without `allowFileWrites`)',
    'minimal-dev': 'minimal, read-only',
    'fresh-proc': 'fresh procfs',
  };
  const rows = view.map((entry) => `| \`${entry.path}\` | ${words[entry.access]} | ${entry.why} |`);
  return ['| path | access | why |', '| --- | --- | --- |', ...rows].join('\n');
}
