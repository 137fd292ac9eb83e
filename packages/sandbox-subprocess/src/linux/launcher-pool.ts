// Warm launchers: the run's wrapper shell (wrapper-shell.ts), started early: it has closed what it
// inherited, joined a fresh pair of per-run cgroups and waits for its instructions (the rest of
// the run: rlimits, `exec bwrap --args FD` and bwrap's arguments) on its instructions pipe.
//
// Why: moving a process into a cgroup takes the kernel's cgroup_threadgroup_rwsem for writing,
// which waits for an RCU grace period unless another move happened moments before. On the
// project's VM that is ~11 ms, paid by the first run after any pause (measured: a shell that
// joins a pids group after 30 ms of quiet takes 14 ms instead of 3). A launcher pays it in the
// background, between runs; the run itself only writes one line to a pipe.
//
// Each launcher and its groups serve exactly one run and are then removed: a fresh group has
// zero counters (so `memoryExceeded` is exact: cgroup v2's memory.events and v1's oom_kill
// cannot be reset) and no memory charged by someone else's page cache.
import { type ChildProcess, spawn } from 'node:child_process';
import type { Socket } from 'node:net';
import type { Writable } from 'node:stream';
import {
  type CgroupSupport,
  createRunCgroupsInBackground,
  planRunGroups,
  type RunCgroups,
  removeBases,
} from './cgroup.ts';
import { bashPath } from './detect.ts';
import {
  helperEnvironment,
  instructionsDescriptor,
  wrapperDescriptorCount,
  wrapperScript,
} from './wrapper-shell.ts';

/** What a launcher is prepared for; runs with the same shape can share a pool. */
export interface LauncherShape {
  readonly memory: boolean;
  readonly pids: boolean;
  /** Pipes beyond stdio (the command's fds 3, 4, ...). */
  readonly extraPipes: number;
  /** Whether the launcher leads its own process group (the fallback without bubblewrap). */
  readonly detached: boolean;
}

/** A started launcher, taken out of the pool for one run. */
export interface Launcher {
  readonly child: ChildProcess;
  readonly cgroups: RunCgroups;
  /** Makes the launcher keep the host alive again (pooled ones do not). */
  ref(): void;
  /** Kills it and removes its groups (in the background): for a launcher that will run nothing. */
  discard(): void;
}

/** Launchers kept ready per shape. Two, so that back-to-back runs both find one. */
const perShape = 2;
/** Shapes kept; the least recently used one is dropped beyond this. */
const maxShapes = 4;

const pools = new Map<string, Launcher[]>();
const refilling = new Set<string>();
let exitHookInstalled = false;

/** Placeholder limits written at creation; the run's own are written when it takes the launcher. */
const placeholder = { memoryBytes: 1024 * 1024 * 1024, pids: 4_194_304 };

/**
 * Takes a ready launcher of `shape`, or returns undefined (the caller starts cold). Either way
 * the pool for `shape` is refilled in the background.
 */
export function takeLauncher(support: CgroupSupport, shape: LauncherShape): Launcher | undefined {
  const key = shapeKey(shape);
  const pool = pools.get(key);
  pools.delete(key);
  pools.set(key, pool ?? []); // most recently used last
  let taken: Launcher | undefined;
  while (pool !== undefined && pool.length > 0 && taken === undefined) {
    const candidate = pool.shift()!;
    if (candidate.child.exitCode === null && candidate.child.signalCode === null) taken = candidate;
    else discardLauncher(candidate);
  }
  scheduleRefill(support, shape, key);
  evictBeyondLimit();
  return taken;
}

function scheduleRefill(support: CgroupSupport, shape: LauncherShape, key: string): void {
  if (refilling.has(key)) return;
  refilling.add(key);
  // After the current run has been started: the fork of this (large) process costs a few ms.
  setImmediate(() => {
    void refill(support, shape, key).finally(() => refilling.delete(key));
  }).unref();
}

async function refill(support: CgroupSupport, shape: LauncherShape, key: string): Promise<void> {
  for (;;) {
    const pool = pools.get(key);
    if (pool === undefined || pool.length >= perShape) return;
    const launcher = await startLauncher(support, shape);
    if (launcher === undefined) return;
    if (pools.get(key) === pool) pool.push(launcher);
    else discardLauncher(launcher); // the shape was dropped meanwhile
  }
}

async function startLauncher(
  support: CgroupSupport,
  shape: LauncherShape,
): Promise<Launcher | undefined> {
  const limits = {
    memoryBytes: shape.memory ? placeholder.memoryBytes : 0,
    pids: shape.pids ? placeholder.pids : 0,
  };
  const planned = planRunGroups(support, limits);
  if (planned.procsFiles.length === 0) return undefined;
  if (!exitHookInstalled) {
    exitHookInstalled = true;
    process.once('exit', drainLaunchers);
  }
  let child: ChildProcess;
  try {
    if (bashPath === undefined) throw new Error('bash not found');
    // Spawned before its groups are made, it joins them at the NUL written once they exist.
    child = spawn(
      bashPath,
      [
        '--norc',
        '--noprofile',
        '-c',
        wrapperScript(shape, planned.procsFiles, true),
        'coda-sandbox',
      ],
      {
        cwd: '/',
        env: helperEnvironment,
        stdio: Array.from({ length: wrapperDescriptorCount(shape) }, () => 'pipe' as const),
        detached: shape.detached,
      },
    );
  } catch {
    return undefined;
  }
  const cgroups = await createRunCgroupsInBackground(support, limits, planned);
  if (cgroups === undefined) {
    child.kill('SIGKILL');
    return undefined;
  }
  const instructions = child.stdio[instructionsDescriptor(shape)] as Writable;
  instructions.on('error', () => {}); // a launcher that died is seen through its exit
  instructions.write('\0');
  const ref = holdUnreferenced(child);
  const launcher: Launcher = {
    child,
    cgroups,
    ref,
    discard: () => discardLauncher(launcher),
  };
  const onGone = (): void => {
    for (const pool of pools.values()) {
      const index = pool.indexOf(launcher);
      if (index >= 0) {
        pool.splice(index, 1);
        discardLauncher(launcher);
      }
    }
  };
  child.once('exit', onGone);
  child.once('error', onGone);
  return launcher;
}

/**
 * Makes `child` and its pipes stop keeping the host alive (a pooled process waits for a run
 * that may never come); the returned function undoes that when a run takes it.
 */
export function holdUnreferenced(child: ChildProcess): () => void {
  const streams = child.stdio.filter((stream) => stream !== null) as unknown as Socket[];
  const setRef = (on: boolean): void => {
    if (on) child.ref();
    else child.unref();
    for (const stream of streams) {
      if (on) stream.ref?.();
      else stream.unref?.();
    }
  };
  setRef(false);
  return () => setRef(true);
}

/** Kills a launcher that will not run anything and removes its groups (in the background). */
export function discardLauncher(launcher: Launcher): void {
  try {
    launcher.child.kill('SIGKILL');
  } catch {
    // Already gone.
  }
  void launcher.cgroups.kill().then(() => launcher.cgroups.remove());
}

function evictBeyondLimit(): void {
  while (pools.size > maxShapes) {
    const [oldest, pool] = pools.entries().next().value as [string, Launcher[]];
    pools.delete(oldest);
    for (const launcher of pool) discardLauncher(launcher);
  }
}

/** Kills every pooled launcher now (host exit; tests). */
export function drainLaunchers(): void {
  for (const pool of pools.values()) {
    for (const launcher of pool.splice(0)) {
      try {
        launcher.child.kill('SIGKILL');
      } catch {
        // Already gone.
      }
      launcher.cgroups.killSync();
      launcher.cgroups.removeSync();
    }
  }
  pools.clear();
  removeBases();
}

/** Resolves once no refill is under way (for tests and diagnostics). */
export async function refillsSettled(): Promise<void> {
  while (refilling.size > 0) await new Promise((resolve) => setTimeout(resolve, 1));
}

/** PIDs of the launchers waiting in the pool (for tests and diagnostics). */
export function pooledLauncherPids(): number[] {
  return [...pools.values()].flat().flatMap((launcher) => launcher.child.pid ?? []);
}

function shapeKey(shape: LauncherShape): string {
  return `${+shape.memory}${+shape.pids}${+shape.detached}:${shape.extraPipes}`;
}
