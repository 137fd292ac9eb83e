// The Node command line of a runner child: the permission model, the heap limit, the runner.
import type { ParserLimits } from '@coda/sandbox-core';
import type { PythonInterpreter } from './python-interpreter.ts';
import { jsonCostPath, runnerPath, wirePath } from './runner-files.ts';

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
  /** Paths the child may read besides the runner: the module's directory and `allowRead`, real. */
  readPaths: readonly string[];
  /** The limits the child starts with. */
  limits: ParserLimits;
  /** The child's working directory: an empty temporary directory. */
  cwd: string;
  /** Which runner the child runs; `python` needs {@link RunnerPlan.python}. Default `node`. */
  runtime?: 'node' | 'python';
  /** The interpreter of a `python` child. */
  python?: PythonInterpreter;
  /** The module's real path (the Python runner loads it by path, not by URL). */
  modulePath?: string;
  /**
   * Start a Python fork server (a zygote that forks one child per call) rather than a runner
   * for one call; it reports each call's end on a second extra descriptor, fd 4.
   */
  forkServer?: boolean;
  /**
   * Start the isolate child of `processModel: 'isolate'` (one Node process serving every call,
   * each in a fresh isolated-vm isolate) rather than a runner for one call; it reports each
   * call's end on a second extra descriptor, fd 4. `limits.memoryBytes` is then the child's.
   */
  isolateServer?: IsolateServerFiles;
}

/** What the isolate child loads besides its own files: the isolated-vm addon, found by the host. */
export interface IsolateServerFiles {
  /** Absolute real path of isolated-vm's compiled addon (`.node`), the one it loads. */
  addonPath: string;
}

/**
 * Where the runner finds which descriptors the child inherited without close-on-exec: Node's
 * permission model does not check reads and writes on a descriptor, so the runner closes those
 * before the parser module loads (see `closeInheritedDescriptors` in the runner).
 */
export const descriptorInfoPath = '/proc/self/fdinfo/';

/**
 * Arguments of `node` for one runner child. Everything the permission model can deny is denied:
 * no writes, no child processes, no workers, no addons, no WASI, no inspector; reads only of the
 * runner files and `readPaths` (and, on Linux, the child's own descriptor table). Beyond it:
 * `node:sqlite`, which the permission model does not cover in Node 24, is not there at all
 * (`ERR_UNKNOWN_BUILTIN_MODULE`), and SIGUSR1 does not start an inspector.
 */
export function nodeArguments(plan: RunnerPlan): string[] {
  return [
    '--permission',
    `--allow-fs-read=${runnerPath}`,
    `--allow-fs-read=${wirePath}`,
    `--allow-fs-read=${jsonCostPath}`,
    ...plan.readPaths.map((path) => `--allow-fs-read=${path}`),
    ...(process.platform === 'linux' ? [`--allow-fs-read=${descriptorInfoPath}`] : []),
    `--max-old-space-size=${heapLimitMiB(plan.limits.memoryBytes)}`,
    '--no-addons',
    '--no-experimental-sqlite',
    '--disable-sigusr1',
    '--disable-proto=delete',
    runnerPath,
    plan.moduleUrl,
  ];
}
