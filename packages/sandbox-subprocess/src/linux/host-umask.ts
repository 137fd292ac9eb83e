// The host's umask as it is now, for the run's wrapper to set. A warm launcher (launcher-pool.ts)
// and a pre-started sandbox (prestart-pool.ts) are spawned before their run and would otherwise
// keep the umask the host had then: a host that tightened it since (process.umask(0o077)) got
// files its warm runs wrote in a writable directory with the old, looser modes, where a cold
// run got the new ones (found by an attack review of the pre-started sandboxes). Read from
// /proc rather than with process.umask(), whose read form sets the mask for a moment
// (deprecated: DEP0139) and throws in worker threads.
import { readFileSync } from 'node:fs';

/** The `umask` step (octal, as /proc shows it), or undefined where the kernel does not say. */
export function umaskStep(): string | undefined {
  let status: string;
  try {
    status = readFileSync('/proc/self/status', 'utf8');
  } catch {
    return undefined;
  }
  const mask = /^Umask:\s+([0-7]{3,4})$/m.exec(status)?.[1];
  return mask === undefined ? undefined : `umask ${mask}`;
}
