// The resident memory of a worker process, read by the host that supervises it.
import { readFileSync } from 'node:fs';

/** Resident set size of `pid` in bytes from /proc (Linux); undefined where unavailable. */
export function readRss(pid: number | undefined): number | undefined {
  if (pid === undefined) return undefined;
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const match = /^VmRSS:\s+(\d+)\s+kB/m.exec(status);
    return match ? Number(match[1]) * 1024 : undefined;
  } catch {
    return undefined;
  }
}
