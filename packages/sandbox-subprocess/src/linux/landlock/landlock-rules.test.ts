import { describe, expect, it } from 'vitest';
import type { ViewEntry } from '../filesystem-view.ts';
import { filesystemRules, networkRules, type TreeHost } from './landlock-rules.ts';

/** A small host tree: directories map to their entries, `@` marks a symlink. */
const tree: Record<string, string[]> = {
  '/etc': ['passwd', 'ssh', 'ssl', 'localtime@'],
  '/etc/ssh': ['ssh_host_key'],
  '/etc/ssl': ['certs', 'private'],
  '/etc/ssl/certs': [],
  '/etc/ssl/private': [],
  '/usr': [],
  '/proc': [],
  '/opt/tool': [],
  '/srv/job': [],
};
const host: TreeHost = {
  kind: (path) =>
    path in tree
      ? 'dir'
      : Object.values(tree)
            .flat()
            .some((name) => path.endsWith(`/${name}`))
        ? 'file'
        : undefined,
  entries: (path) =>
    (tree[path] ?? []).map((name) => ({
      name: name.replace('@', ''),
      symlink: name.endsWith('@'),
    })),
};
const row = (path: string, access: ViewEntry['access']): ViewEntry => ({ path, access, why: '' });
const view = [
  row('/usr', 'read-only'),
  row('/lib32', 'read-only'), // absent on this host
  row('/etc', 'read-only'),
  row('/etc/ssh', 'masked'),
  row('/etc/ssl/private', 'masked'),
  row('/tmp', 'private'),
  row('/dev', 'minimal-dev'),
  row('/proc', 'fresh-proc'),
  row('/proc/kcore', 'masked'),
];
// Rights from include/uapi/linux/landlock.h: EXECUTE 1, WRITE_FILE 2, READ_FILE 4, READ_DIR 8.
const READ = 1 | 4 | 8;
const READ_DIR = 8;
const DEVICE_ABI7 = 2 | 4 | (1 << 14) | (1 << 15);
const ALL_ABI7 = 0xffff;

describe('Landlock rules from the view', () => {
  it('grants read-only rows, leaves masked paths out around them, and grants writable additions all rights', () => {
    const rules = filesystemRules(
      view,
      {
        readOnly: [{ source: '/opt/tool', path: '/opt/tool' }],
        writable: [{ source: '/srv/job', path: '/srv/job' }],
        hidden: [],
      },
      7,
      host,
    );
    expect(rules).toEqual([
      { path: '/usr', access: READ },
      { path: '/etc', access: READ_DIR },
      { path: '/etc/passwd', access: READ },
      { path: '/etc/ssl', access: READ_DIR },
      { path: '/etc/ssl/certs', access: READ },
      ...['/dev/null', '/dev/zero', '/dev/full', '/dev/random', '/dev/urandom', '/dev/tty'].map(
        (path) => ({
          path,
          access: DEVICE_ABI7,
        }),
      ),
      { path: '/proc', access: READ },
      { path: '/opt/tool', access: READ },
      { path: '/srv/job', access: ALL_ABI7 },
    ]);
  });

  it('leaves a hidden path out the same way', () => {
    const rules = filesystemRules(
      view,
      { readOnly: [], writable: [], hidden: ['/etc/passwd'] },
      7,
      host,
    );
    expect(rules.filter((rule) => rule.path.startsWith('/etc'))).toEqual([
      { path: '/etc', access: READ_DIR },
      { path: '/etc/ssl', access: READ_DIR },
      { path: '/etc/ssl/certs', access: READ },
    ]);
  });

  it('refuses TCP bind and connect only with the network off and an ABI that has them', () => {
    const off = { kind: 'off' } as const;
    expect(networkRules(off, 7)).toEqual({ handled: 3, ports: [] });
    expect(networkRules(off, 4)).toEqual({ handled: 3, ports: [] });
    expect(networkRules(off, 3)).toEqual({ handled: 0, ports: [] });
    expect(networkRules({ kind: 'on' }, 7)).toEqual({ handled: 0, ports: [] });
  });

  it("grants a network allowlist's run TCP connect to the proxy's port alone, never bind", () => {
    // LANDLOCK_ACCESS_NET_BIND_TCP = 1, CONNECT_TCP = 2 (include/uapi/linux/landlock.h).
    expect(networkRules({ kind: 'proxy', port: 40_123 }, 4)).toEqual({
      handled: 3,
      ports: [{ port: 40_123, access: 2 }],
    });
    expect(() => networkRules({ kind: 'proxy', port: 40_123 }, 3)).toThrow(
      'TCP rules need Landlock ABI 4',
    );
  });
});
