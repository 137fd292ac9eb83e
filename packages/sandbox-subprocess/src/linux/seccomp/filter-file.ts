// Writes each distinct seccomp program once to a private file and opens a fresh descriptor per
// run: bwrap reads the descriptor to EOF, and a file works for spawn and spawnSync alike.
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, openSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildSeccompFilter, type SeccompFilterOptions } from './filter.ts';

let directory: string | undefined;
const files = new Map<string, { path: string; program: Buffer }>();

/** Opens (read-only) the filter file for `options`; the caller closes the descriptor. */
export function openSeccompFilter(options: SeccompFilterOptions): number {
  const key = JSON.stringify([options.allowNetwork, options.allowedSyscalls ?? null]);
  let file = files.get(key);
  if (file === undefined) {
    const program = buildSeccompFilter(options);
    directory ??= mkdtempSync(join(tmpdir(), 'coda-seccomp-'));
    const name = `${createHash('sha256').update(program).digest('hex').slice(0, 16)}.bpf`;
    file = { path: join(directory, name), program };
    writeFileSync(file.path, program, { mode: 0o600 });
    files.set(key, file);
  }
  try {
    return openSync(file.path, 'r');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    // A temp cleaner removed it while the host ran: write it again.
    mkdirSync(directory!, { recursive: true, mode: 0o700 });
    writeFileSync(file.path, file.program, { mode: 0o600 });
    return openSync(file.path, 'r');
  }
}
