// A PATH whose `bwrap` is the real one behind a small script that injects the refusal a host
// prints (AppArmor, a container's seccomp profile): how tests get the backend such hosts get.
import { chmodSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll } from 'vitest';

const dirs: string[] = [];

/** A PATH whose `bwrap` fails with `message` when `when` matches its arguments. */
export function pathWithBwrap(when: 'network' | 'always', message: string): string {
  const bin = mkdtempSync(join(tmpdir(), 'coda-fake-bwrap-'));
  dirs.push(bin);
  const test = when === 'always' ? 'true' : '[ "$a" = --unshare-net ]';
  writeFileSync(
    join(bin, 'bwrap'),
    `#!/bin/sh\nfor a in "$@"; do if ${test}; then echo '${message}' >&2; exit 1; fi; done\nexec /usr/bin/bwrap "$@"\n`,
  );
  chmodSync(join(bin, 'bwrap'), 0o755);
  for (const tool of ['true', 'prlimit', 'setpriv'])
    symlinkSync(`/usr/bin/${tool}`, join(bin, tool));
  return bin;
}

/** Removes every PATH directory made by {@link pathWithBwrap}. */
export function removeFakeBwraps(): void {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
}

/**
 * Runs the calling file's (or describe's) sandboxes on the Landlock backend: bubblewrap refused
 * as in a container, from before its first test; the host's PATH back and the fake gone after
 * its last hook (call it before the hooks that make and close the sandboxes).
 */
export function useLandlockBackend(): void {
  const hostPath = process.env.PATH;
  beforeAll(() => {
    process.env.PATH = pathWithBwrap('always', 'bwrap: setting up uid map: Permission denied');
  });
  afterAll(() => {
    removeFakeBwraps();
    process.env.PATH = hostPath;
  });
}
