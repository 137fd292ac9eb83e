// Each distinct seccomp program is built once per process and kept in memory; a run hands it to
// bubblewrap through a pipe (or, for spawnSync, an unlinked file), so nothing is left on disk.
import { buildSeccompFilter, type SeccompFilterOptions } from './filter.ts';

const programs = new Map<string, Buffer>();

/** The encoded filter for `options`, built on first use. */
export function seccompProgram(options: SeccompFilterOptions): Buffer {
  const key = JSON.stringify([
    options.allowNetwork,
    options.allowUnixConnect === true,
    options.allowedSyscalls ?? null,
    options.extraSyscalls ?? null,
    options.refuseTruncateByName === true,
    options.tcpClientOnly === true,
  ]);
  let program = programs.get(key);
  if (program === undefined) {
    program = buildSeccompFilter(options);
    programs.set(key, program);
  }
  return program;
}
