// The Node command line of a runner child: the permission model, the heap limit, the runner.
import type { ParserLimits } from '@coda/sandbox-core';
import { runnerPath, wirePath } from './runner-files.ts';

const mebibyte = 1024 * 1024;

/**
 * The V8 old-space limit for a memory limit: half of it, so that V8 fails with "heap out of
 * memory" before the total (heap + young generation + Node itself + Buffers) reaches the limit.
 */
export function heapLimitMiB(memoryBytes: number): number {
  return Math.max(8, Math.floor(memoryBytes / mebibyte / 2));
}

/** What the child needs to start: the module it parses with and what it may read. */
export interface RunnerPlan {
  /** `file:` URL of the parser module. */
  moduleUrl: string;
  /** Paths the child may read besides the runner: the module's directory and `allowRead`. */
  readPaths: readonly string[];
  /** The limits the child starts with. */
  limits: ParserLimits;
  /** The child's working directory: an empty temporary directory. */
  cwd: string;
}

/**
 * Arguments of `node` for one runner child. Everything the permission model can deny is denied:
 * no writes, no child processes, no workers, no addons, no WASI, no inspector; reads only of the
 * runner files and `readPaths`.
 */
export function nodeArguments(plan: RunnerPlan): string[] {
  return [
    '--permission',
    `--allow-fs-read=${runnerPath}`,
    `--allow-fs-read=${wirePath}`,
    ...plan.readPaths.map((path) => `--allow-fs-read=${path}`),
    `--max-old-space-size=${heapLimitMiB(plan.limits.memoryBytes)}`,
    '--no-addons',
    '--disable-proto=delete',
    runnerPath,
    plan.moduleUrl,
  ];
}
