// Writes each distinct seccomp program once to a private file and opens a fresh descriptor per
// run: bwrap reads the descriptor to EOF, and a file works for spawn and spawnSync alike.
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, openSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildSeccompFilter, type SeccompFilterOptions } from './filter.ts';

let directory: string | undefined;
const files = new Map<string, { path: string; program: Buffer }>();

function filterFile(options: SeccompFilterOptions): { path: string; program: Buffer } {
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
  return file;
}

/**
 * The path of the filter file for `options` (written once per distinct program), for a
 * launcher shell that opens it itself. Written again if a temp cleaner removed it.
 */
export function seccompFilterPath(options: SeccompFilterOptions): string {
  const file = filterFile(options);
  if (!existsSync(file.path)) {
    mkdirSync(directory!, { recursive: true, mode: 0o700 });
    writeFileSync(file.path, file.program, { mode: 0o600 });
  }
  return file.path;
}

/** Opens (read-only) the filter file for `options`; the caller closes the descriptor. */
export function openSeccompFilter(options: SeccompFilterOptions): number {
  const file = filterFile(options);
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
