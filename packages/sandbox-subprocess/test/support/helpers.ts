// Shared helpers for the real-sandbox tests: temp dirs, a process scan and a few programs.
import {
  chownSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  realpathSync,
  rmSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { onTestFinished } from 'vitest';
import type { ProcessExit, SandboxedProcess } from '../../src/index.ts';

/** Debian's python3 when present (no pyenv shim start-up), else whatever PATH has. */
export const python = existsSync('/usr/bin/python3') ? '/usr/bin/python3' : 'python3';

/** The Node binary running the tests, resolved. */
export const node = realpathSync(process.execPath);

/** The identity commands run as when the tests run as root (the default `runAs`). */
export const sandboxIdentity = { uid: 65534, gid: 65534 };

/**
 * A fresh directory (under `base`, default the OS temp dir) removed after the test. Owned by the
 * sandbox identity when the tests run as root, so that a command may write into it.
 */
export function tempDir(base = tmpdir()): string {
  const dir = realpathSync(mkdtempSync(join(base, 'coda-subprocess-')));
  if (process.getuid?.() === 0) chownSync(dir, sandboxIdentity.uid, sandboxIdentity.gid);
  onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** Makes `path` (a new directory) and hands it to the sandbox identity, so a command can write it. */
export function sandboxDir(path: string): string {
  mkdirSync(path);
  if (process.getuid?.() === 0) chownSync(path, sandboxIdentity.uid, sandboxIdentity.gid);
  return path;
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

/**
 * Everything a spawned process wrote to stdout and stderr, and its exit, once both streams have
 * closed: `exited` is the command's end, not its output's, and under load a run's last line
 * arrived after it (a fresh-clone CI run, attack-prestart.test.ts).
 */
export async function collectSpawned(child: SandboxedProcess): Promise<{
  stdout: string;
  stderr: string;
  exit: ProcessExit;
}> {
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk) => {
    stdout += chunk;
  });
  child.stderr.on('data', (chunk) => {
    stderr += chunk;
  });
  const closed = (stream: NodeJS.ReadableStream) =>
    new Promise<void>((resolve) => stream.once('close', () => resolve()));
  const [exit] = await Promise.all([child.exited, closed(child.stdout), closed(child.stderr)]);
  return { stdout, stderr, exit };
}
