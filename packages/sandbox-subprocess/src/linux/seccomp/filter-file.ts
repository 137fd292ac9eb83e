// Writes each distinct seccomp program once to a private file and opens a fresh descriptor per
// run: bwrap reads the descriptor to EOF, and a file works for spawn and spawnSync alike.
import { createHash } from 'node:crypto';
import { mkdtempSync, openSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildSeccompFilter, type SeccompFilterOptions } from './filter.ts';

let directory: string | undefined;
const files = new Map<string, string>();

/** Opens (read-only) the filter file for `options`; the caller closes the descriptor. */
export function openSeccompFilter(options: SeccompFilterOptions): number {
  const key = JSON.stringify([options.allowNetwork, options.allowedSyscalls ?? null]);
  let file = files.get(key);
  if (file === undefined) {
    const program = buildSeccompFilter(options);
    directory ??= mkdtempSync(join(tmpdir(), 'coda-seccomp-'));
    file = join(
      directory,
      `${createHash('sha256').update(program).digest('hex').slice(0, 16)}.bpf`,
    );
    writeFileSync(file, program, { mode: 0o600 });
    files.set(key, file);
  }
  return openSync(file, 'r');
}
