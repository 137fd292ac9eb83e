// Shared helpers for the real-sandbox tests: temp dirs, a process scan and a few programs.
import { existsSync, mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { onTestFinished } from 'vitest';

/** Debian's python3 when present (no pyenv shim start-up), else whatever PATH has. */
export const python = existsSync('/usr/bin/python3') ? '/usr/bin/python3' : 'python3';

/** The Node binary running the tests, resolved. */
export const node = realpathSync(process.execPath);

/** A fresh directory (under `base`, default the OS temp dir) removed after the test. */
export function tempDir(base = tmpdir()): string {
  const dir = realpathSync(mkdtempSync(join(base, 'coda-subprocess-')));
  onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** A token unique to the test, to find the processes it started. */
export function token(): string {
  return `coda-token-${process.pid}-${Math.random().toString(36).slice(2)}`;
}

/** PIDs of live (not zombie) processes whose command line contains `needle`. */
export function processesWith(needle: string): number[] {
  const found: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const cmdline = readFileSync(`/proc/${entry}/cmdline`, 'utf8');
      if (!cmdline.includes(needle)) continue;
      const state = /^State:\s+(\S)/m.exec(readFileSync(`/proc/${entry}/status`, 'utf8'))?.[1];
      if (state !== 'Z' && Number(entry) !== process.pid) found.push(Number(entry));
    } catch {
      // The process ended while we looked.
    }
  }
  return found;
}

/** Waits (bounded) until no process has `needle` in its command line; returns what is left. */
export async function settledProcesses(needle: string, withinMs = 1_500): Promise<number[]> {
  const deadline = Date.now() + withinMs;
  let left = processesWith(needle);
  while (left.length > 0 && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 25));
    left = processesWith(needle);
  }
  for (const pid of left) {
    try {
      process.kill(pid, 'SIGKILL'); // never leave a test's process behind
    } catch {}
  }
  return left;
}
