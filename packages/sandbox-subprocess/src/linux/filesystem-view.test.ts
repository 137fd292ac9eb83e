import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  defaultFilesystemView,
  type HostPaths,
  viewArguments,
  viewTable,
} from './filesystem-view.ts';

const docs = join(import.meta.dirname, '../../../../docs/subprocess.md');

/** A host with merged /usr, no /lib32, and /etc/ssh as a directory. */
const links: Record<string, { link: string }> = { '/bin': { link: 'usr/bin' } };
const dirs = ['/etc/ssh', '/proc/acpi', '/usr', '/etc', '/proc/sys'];
const host: HostPaths = {
  kind: (path) =>
    links[path] ??
    (dirs.includes(path)
      ? 'dir'
      : path === '/lib32' || path.startsWith('/proc/')
        ? undefined
        : 'file'),
};

describe('filesystem view', () => {
  it('is documented in docs/subprocess.md exactly as the data says', () => {
    const text = readFileSync(docs, 'utf8');
    const table = /<!-- view-table:start -->\n([\s\S]*?)\n<!-- view-table:end -->/.exec(text)?.[1];
    expect(table).toBe(viewTable());
  });

  it('turns into bubblewrap arguments: links stay links, masks cover, remounts come last', () => {
    const args = viewArguments(
      defaultFilesystemView.filter((entry) =>
        [
          '/usr',
          '/bin',
          '/lib32',
          '/etc',
          '/etc/ssh',
          '/etc/shadow',
          '/tmp',
          '/dev',
          '/proc',
          '/proc/sys',
        ].includes(entry.path),
      ),
      {
        readOnly: [{ source: '/proc/1/fd/9', path: '/root/.cache/node' }],
        writable: [{ source: '/proc/1/fd/8', path: '/srv/job' }],
        hidden: ['/srv/job/secret'],
      },
      false,
      host,
      1024,
    );
    expect(args).toEqual([
      '--ro-bind',
      '/usr',
      '/usr',
      '--symlink',
      'usr/bin',
      '/bin',
      '--ro-bind',
      '/etc',
      '/etc',
      '--ro-bind',
      '/dev/null',
      '/etc/shadow',
      '--perms',
      '0755',
      '--tmpfs',
      '/etc/ssh',
      '--size',
      '1024',
      '--perms',
      '1777',
      '--tmpfs',
      '/tmp',
      '--dev',
      '/dev',
      '--proc',
      '/proc',
      '--ro-bind',
      '/proc/sys',
      '/proc/sys',
      '--perms',
      '0755',
      '--dir',
      '/srv',
      '--perms',
      '0755',
      '--dir',
      '/root',
      '--perms',
      '0755',
      '--dir',
      '/root/.cache',
      '--bind',
      '/proc/1/fd/8',
      '/srv/job',
      '--ro-bind',
      '/proc/1/fd/9',
      '/root/.cache/node',
      '--ro-bind',
      '/dev/null',
      '/srv/job/secret',
      '--remount-ro',
      '/etc/ssh',
      '--remount-ro',
      '/tmp',
      '--remount-ro',
      '/dev',
    ]);
  });
});
