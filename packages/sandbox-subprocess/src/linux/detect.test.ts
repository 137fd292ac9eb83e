// Host tools (bwrap, prlimit) come only from PATH directories no sandboxed command can have
// written: a fake bwrap planted in a run's writable directory on the host's PATH would pass the
// next host process's probe and run every command unconfined.
import { chmodSync, chownSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { detectLinux, trustedHostPath } from './detect.ts';

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

/** A directory holding a `bwrap` that reports success for anything, with `mode` (and owner). */
function plantedBwrap(mode: number, owner?: number): string {
  const dir = mkdtempSync(join(tmpdir(), 'coda-planted-'));
  dirs.push(dir);
  writeFileSync(join(dir, 'bwrap'), '#!/bin/sh\nexit 0\n');
  chmodSync(join(dir, 'bwrap'), 0o755);
  chmodSync(dir, mode);
  if (owner !== undefined) chownSync(dir, owner, owner);
  return dir;
}

const isRoot = process.getuid?.() === 0;

describe('host tools on PATH', () => {
  it.each([
    // [directory mode, owner, trusted] — written from the rule, not from the code
    ['0777', undefined, false], // a run's writable directory opened to everyone
    ['0775', undefined, false], // group-writable
    ['0757', undefined, false], // other-writable
    ['0755', undefined, true], // the host's own, writable by it alone
    ...(isRoot ? ([['0755', 65534, false]] as const) : []), // handed to the sandbox identity
  ] as const)('a directory of mode %s (owner %s) is trusted: %s', (mode, owner, trusted) => {
    const dir = plantedBwrap(Number.parseInt(mode, 8), owner);
    const path = `${dir}:/usr/bin:/bin`;
    expect(trustedHostPath(path)).toBe(trusted ? path : '/usr/bin:/bin');
    expect(detectLinux(path).bwrap).toBe(trusted ? `${dir}/bwrap` : '/usr/bin/bwrap');
  });

  it('ignores relative and missing directories', () => {
    expect(trustedHostPath('.:bin::/nonexistent-coda:/usr/bin')).toBe('/usr/bin');
  });
});
