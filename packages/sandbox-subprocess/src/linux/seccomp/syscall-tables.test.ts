// Checks the package's syscall tables against libseccomp's resolver, which reads the kernel's
// own numbering for each architecture.
import { execFileSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { aarch64Syscalls } from './syscalls-aarch64.ts';
import { x86_64Syscalls } from './syscalls-x86-64.ts';

/** Names resolved in one shell per architecture (hundreds of tiny processes otherwise). */
function resolveAll(arch: string, names: readonly string[]): Map<string, number | undefined> {
  const script =
    'for n in "$@"; do printf "%s %s\\n" "$n" "$(scmp_sys_resolver -a "$0" "$n")"; done';
  const out = execFileSync('/bin/sh', ['-c', script, arch, ...names], { encoding: 'utf8' });
  const resolved = new Map<string, number | undefined>();
  for (const line of out.trim().split('\n')) {
    const [name = '', value = ''] = line.split(' ');
    const number = Number(value);
    resolved.set(name, Number.isInteger(number) && number >= 0 ? number : undefined);
  }
  return resolved;
}

describe.each([
  ['x86_64', x86_64Syscalls, 330],
  ['aarch64', aarch64Syscalls, 280],
])('%s syscall table', (arch, table, minimum) => {
  it('matches the kernel numbering for every name libseccomp knows', () => {
    const names = Object.keys(table);
    expect(names.length).toBeGreaterThan(minimum);
    const resolved = resolveAll(arch, names);
    let compared = 0;
    for (const name of names) {
      const expected = resolved.get(name);
      if (expected === undefined) continue; // newer than this libseccomp (457+)
      expect(table[name], name).toBe(expected);
      compared++;
    }
    expect(compared).toBeGreaterThan(minimum);
    for (const name of ['read', 'ptrace', 'clone', 'socket', 'io_uring_setup', 'mount_setattr']) {
      expect(table[name], name).toBe(resolved.get(name));
    }
  });
});
