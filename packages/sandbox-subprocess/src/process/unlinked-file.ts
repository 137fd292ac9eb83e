// A read-only descriptor of bytes that exist in no directory: written to a private temp file,
// opened, then the file and its directory are removed at once. For spawnSync, which cannot write
// to a child's pipes while it runs; nothing is left behind even if the host dies right after.
import { mkdtempSync, openSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** Opens `data` as an anonymous read-only file; the caller closes the descriptor once. */
export function unlinkedFile(data: Uint8Array): number {
  const directory = mkdtempSync(join(tmpdir(), 'coda-run-'));
  try {
    const path = join(directory, 'data');
    writeFileSync(path, data, { mode: 0o600 });
    return openSync(path, 'r');
  } finally {
    rmSync(directory, { recursive: true, force: true });
  }
}
