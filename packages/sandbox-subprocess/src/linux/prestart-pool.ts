// Pre-started sandboxes: the whole confinement of a run started before the run is asked for.
// A warm launcher (launcher-pool.ts) saves the cgroup move; this goes all the way: fresh
// cgroups joined, rlimits set, bubblewrap with the view and namespaces built, seccomp loaded,
// the identity dropped, and a stub (prestart-stub.ts) blocked reading the command, its
// environment and cwd from a pipe. A run then costs about one exec (measured in bench/run.ts).
//
// Each pre-started sandbox serves exactly one run (fresh namespaces, tmpfs and groups each), and
// only a run whose confinement is byte for byte the one it was started with: the pool is keyed by
// the rlimit steps, bubblewrap's options and the seccomp program the run would have had cold
// (linux-plan.ts), computed at the run, so a per-call option or a host path that changed since
// (a masked path that appeared) sends the run down the cold path. Each SubprocessSandbox owns
// its pool; close() ends it.
import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import type { Readable, Writable } from 'node:stream';
import {
  type CgroupSupport,
  createRunCgroupsInBackground,
  planRunGroups,
  type RunCgroups,
  removeBases,
} from './cgroup.ts';
import { bashPath } from './detect.ts';
import { holdUnreferenced, type Launcher } from './launcher-pool.ts';
import {
  commandDescriptor,
  helperEnvironment,
  prestartWrapperScript,
  startedDescriptor,
  type WrapperDescriptors,
  wrapperDescriptorCount,
} from './wrapper-shell.ts';

/** Everything needed to pre-start the sandbox of one key. */
export interface PrestartSpec {
  readonly support: CgroupSupport;
  /** Which groups the run has (each is created with a placeholder limit). */
  readonly groups: { readonly memory: boolean; readonly pids: boolean };
  /** Descriptor layout (its `commandPipe` is implied). */
  readonly layout: Pick<WrapperDescriptors, 'extraPipes'>;
  /** Shell run by the wrapper's subshell after joining the groups: rlimits, `exec bwrap ...`. */
  readonly steps: string;
  /** Bytes for the seccomp and the `--args` descriptors, written at once. */
  readonly inputs: readonly [Uint8Array, Uint8Array];
}

/** A ready sandbox, taken for one run. */
export interface PrestartedSandbox {
  /** The wrapper process, its groups, ref and discard: the run treats it as a launcher. */
  readonly launcher: Launcher;
  /** Whether the stub wrote the start byte (settles as a cold run's start byte does). */
  readonly started: Promise<boolean>;
  /** Hands the stub its command (cwd, environment, argv) and closes the pipe. */
  send(message: Uint8Array): void;
}

interface Entry extends PrestartedSandbox {
  /** Settles true when the stub says it waits for its command, false if it never will. */
  readonly whenReady: Promise<boolean>;
  /** Exited, or discarded: never handed out. */
  gone: boolean;
  /** The stub's host pid and start time, found once it is ready (see {@link findStub}). */
  stub?: ProcessIdentity | undefined;
}

/** A process as /proc shows it: its pid and its start time (which a reused pid does not share). */
interface ProcessIdentity {
  readonly pid: number;
  readonly startTime: string;
}

interface KeyState {
  readonly spec: PrestartSpec;
  readonly ready: Entry[];
  /** Entries started and not yet ready. */
  readonly starting: Set<Entry>;
  /** Pre-starts under way, from their groups' creation until ready or failed. */
  pending: number;
  /** Pre-starts in a row that never got ready; at {@link maxFailures} the key stops refilling. */
  failures: number;
}

/** Ready sandboxes kept per key: two, so that back-to-back runs both find one. */
const perKey = 2;
/** Keys kept per pool; the least recently used one is dropped beyond this. */
const maxKeys = 2;
/** Failed pre-starts in a row after which a key is no longer pre-started (its runs go cold). */
const maxFailures = 3;
/** A pre-start not ready by then is ended and counts as failed. */
const readyTimeoutMs = 10_000;
/** Placeholder limits written at creation; the run's own are written when it takes the sandbox. */
const placeholder = { memoryBytes: 1024 * 1024 * 1024, pids: 4_194_304 };

const livePools = new Set<PrestartPool>();
const owners = new WeakMap<object, PrestartPool>();
/**
 * Closes the pool of an owner that was dropped without `close()`: the exit hook holds every
 * pool that started a sandbox, so a host making a SubprocessSandbox per request and never
 * closing it kept eight idle processes and two pairs of groups per sandbox until it exited
 * (found by an attack review of the pre-started sandboxes).
 */
const abandoned = new FinalizationRegistry<PrestartPool>((pool) => void pool.close());

/** The pool of `owner` (a SubprocessSandbox), created on first use; closed once `owner` is collected. */
export function prestartPoolOf(owner: object): PrestartPool {
  let pool = owners.get(owner);
  if (pool === undefined) {
    pool = new PrestartPool();
    owners.set(owner, pool);
    abandoned.register(owner, pool);
  }
  return pool;
}
let exitHookInstalled = false;

/** One sandbox's pre-started sandboxes, by the key of the confinement they were started with. */
export class PrestartPool {
  readonly #keys = new Map<string, KeyState>();
  #closed = false;

  /**
   * A ready sandbox for `key`, or undefined (the caller starts cold). Either way `spec` is kept
   * for {@link refill}, which the caller triggers once its run has ended.
   */
  take(key: string, spec: PrestartSpec): PrestartedSandbox | undefined {
    if (this.#closed) return undefined;
    const state = this.#keys.get(key) ?? {
      spec,
      ready: [],
      starting: new Set(),
      pending: 0,
      failures: 0,
    };
    this.#keys.delete(key);
    this.#keys.set(key, state); // most recently used last
    while (this.#keys.size > maxKeys) {
      const [oldest, dropped] = this.#keys.entries().next().value as [string, KeyState];
      this.#keys.delete(oldest);
      for (const entry of [...dropped.ready, ...dropped.starting]) discard(entry);
    }
    for (let entry = state.ready.shift(); entry !== undefined; entry = state.ready.shift()) {
      if (!entry.gone && alive(entry.launcher.child) && stubAlive(entry)) return entry;
      discard(entry);
    }
    return undefined;
  }

  /** Starts sandboxes for `key` in the background until it has {@link perKey}. */
  refill(key: string): void {
    const state = this.#keys.get(key);
    if (this.#closed || state === undefined || state.failures >= maxFailures) return;
    if (state.pending > 0) return; // one at a time; it refills again when ready
    if (state.ready.length >= perKey) return;
    registerForExit(this);
    state.pending++;
    void this.#startOne(key, state).finally(() => {
      state.pending--;
      if (state.pending === 0 && this.#keys.get(key) === state) this.refill(key);
    });
  }

  async #startOne(key: string, state: KeyState): Promise<void> {
    const entry = await prestart(state.spec);
    const current = this.#keys.get(key) === state && !this.#closed;
    if (entry === undefined) {
      state.failures++;
      return;
    }
    if (!current) {
      discard(entry);
      return;
    }
    state.starting.add(entry);
    const ok = await entry.whenReady;
    state.starting.delete(entry);
    if (!ok || this.#keys.get(key) !== state || this.#closed) {
      if (!ok) state.failures++;
      discard(entry);
      return;
    }
    state.failures = 0;
    entry.stub = findStub(entry.launcher.child.pid);
    state.ready.push(entry);
  }

  /** Ends every sandbox it holds (a policy change makes them useless); the pool stays usable. */
  clear(): void {
    for (const state of this.#keys.values()) {
      for (const entry of [...state.ready, ...state.starting]) discard(entry);
    }
    this.#keys.clear();
  }

  /** Ends every sandbox it holds and refuses to start more; resolves once all are gone. */
  async close(): Promise<void> {
    this.#closed = true;
    const entries = [...this.#keys.values()].flatMap((state) => [
      ...state.ready,
      ...state.starting,
    ]);
    this.#keys.clear();
    livePools.delete(this);
    await Promise.all(entries.map((entry) => discard(entry)));
  }

  /** Synchronous end of everything (host exit). */
  closeSync(): void {
    this.#closed = true;
    for (const state of this.#keys.values()) {
      for (const entry of [...state.ready, ...state.starting]) {
        entry.gone = true;
        kill(entry.launcher.child);
        entry.launcher.cgroups.killSync();
        entry.launcher.cgroups.removeSync();
      }
    }
    this.#keys.clear();
  }

  /** PIDs of the live wrappers of its sandboxes, ready or starting (for tests and diagnostics). */
  pids(): number[] {
    return [...this.#keys.values()]
      .flatMap((state) => [...state.ready, ...state.starting])
      .flatMap((entry) => (entry.gone ? [] : (entry.launcher.child.pid ?? [])));
  }

  /** Resolves once no pre-start is under way (for tests and diagnostics). */
  async settled(): Promise<void> {
    const busy = (): boolean => [...this.#keys.values()].some((state) => state.pending > 0);
    do await new Promise((resolve) => setTimeout(resolve, 5));
    while (busy());
  }
}

/** Ends `pool`'s sandboxes at host exit (registered once it starts any: an unused pool is not kept). */
function registerForExit(pool: PrestartPool): void {
  livePools.add(pool);
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.once('exit', () => {
    for (const live of livePools) live.closeSync();
    removeBases(); // their groups were still in the bases when the launcher pool's hook ran
  });
}

/** Starts one sandbox of `spec`: fresh groups, the wrapper, its inputs written at once. */
async function prestart(spec: PrestartSpec): Promise<Entry | undefined> {
  const limits = {
    memoryBytes: spec.groups.memory ? placeholder.memoryBytes : 0,
    pids: spec.groups.pids ? placeholder.pids : 0,
  };
  const planned = planRunGroups(spec.support, limits);
  if (planned.procsFiles.length === 0) return undefined;
  const layout = { ...spec.layout, commandPipe: true };
  let child: ChildProcess;
  try {
    if (bashPath === undefined) throw new Error('bash not found');
    const script = prestartWrapperScript(layout, planned.procsFiles, spec.steps);
    child = spawn(bashPath, ['--norc', '--noprofile', '-c', script, 'coda-sandbox'], {
      cwd: '/',
      env: helperEnvironment,
      stdio: Array.from({ length: wrapperDescriptorCount(layout) }, () => 'pipe' as const),
    });
  } catch {
    return undefined;
  }
  const cgroups = await createRunCgroupsInBackground(spec.support, limits, planned);
  if (cgroups === undefined) {
    kill(child);
    return undefined;
  }
  const ref = holdUnreferenced(child);
  // The groups exist: the NUL before bwrap's options lets the wrapper go on.
  const [seccomp, options] = spec.inputs;
  [seccomp, Buffer.concat([Buffer.from('\0'), options])].forEach((data, index) => {
    const stream = child.stdio[3 + spec.layout.extraPipes + index] as Writable | null;
    stream?.on('error', () => {}); // a wrapper that died early is seen through its exit
    stream?.end(data);
  });
  const commandPipe = child.stdio[commandDescriptor(layout)] as Writable;
  commandPipe.on('error', () => {});
  const startPipe = child.stdio[startedDescriptor(layout)] as Readable;
  let onReady: (ok: boolean) => void = () => {};
  const whenReady = new Promise<boolean>((resolve) => {
    onReady = resolve;
  });
  let seen = false;
  startPipe.on('data', (chunk: Buffer) => {
    if (chunk.includes(0x72)) onReady(true); // `r`: the stub waits for its command
    if (chunk.includes(0x73)) seen = true; // `s`: the command is being executed
  });
  const started = new Promise<boolean>((resolve) => {
    const done = (): void => resolve(seen);
    startPipe.once('end', done);
    startPipe.once('close', done);
    startPipe.once('error', done);
    child.once('exit', () => setTimeout(done, 1_000).unref());
  });
  const timer = setTimeout(() => onReady(false), readyTimeoutMs);
  timer.unref();
  void whenReady.then(() => clearTimeout(timer));
  const entry: Entry = {
    gone: false,
    whenReady,
    started,
    launcher: { child, cgroups, ref, discard: () => void discard(entry) },
    send: (message) => commandPipe.end(message),
  };
  const onGone = (): void => {
    entry.gone = true;
    onReady(false);
  };
  child.once('exit', onGone);
  child.once('error', onGone);
  return entry;
}

/** Kills a sandbox that will run nothing and removes its groups; resolves once they are gone. */
function discard(entry: Entry): Promise<void> {
  entry.gone = true;
  const { child, cgroups } = entry.launcher;
  entry.launcher.ref(); // whoever waits for this keeps the host alive until it is done
  const exited =
    child.exitCode !== null || child.signalCode !== null
      ? Promise.resolve()
      : new Promise<void>((resolve) => child.once('exit', () => resolve()));
  kill(child);
  return exited.then(() => removeGroups(cgroups));
}

async function removeGroups(cgroups: RunCgroups): Promise<void> {
  await cgroups.kill();
  await cgroups.remove();
}

/**
 * Whether the wrapper still runs: not reported gone, and not a zombie that Node has yet to reap
 * (it dies with its bwrap, so a sandbox killed moments ago is not handed out).
 */
function alive(child: ChildProcess): boolean {
  if (child.exitCode !== null || child.signalCode !== null) return false;
  try {
    const stat = readFileSync(`/proc/${child.pid}/stat`, 'utf8');
    return !/^[ZX]/.test(stat.slice(stat.lastIndexOf(')') + 2));
  } catch {
    return false;
  }
}

/**
 * The stub of a ready sandbox: the leaf below its wrapper (wrapper, bwrap, bwrap's pid 1, the
 * stub, one child each while it waits). Undefined where /proc does not list children: then only
 * the wrapper is checked.
 */
function findStub(wrapper: number | undefined): ProcessIdentity | undefined {
  let pid = wrapper;
  for (let depth = 0; pid !== undefined && depth < 3; depth++) {
    let children: string[];
    try {
      children = readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(' ');
    } catch {
      return undefined;
    }
    pid = children.length === 1 && children[0] !== '' ? Number(children[0]) : undefined;
  }
  const startTime = pid === undefined ? undefined : processStart(pid);
  return startTime === undefined ? undefined : { pid: pid!, startTime };
}

/**
 * Whether the stub still waits: a stub killed from outside (the OOM killer, a stray signal)
 * leaves its wrapper running for milliseconds more, until bwrap has noticed, and a run handed
 * that sandbox failed `UNAVAILABLE` where it would have run cold (found by an attack review).
 */
function stubAlive(entry: Entry): boolean {
  return entry.stub === undefined || processStart(entry.stub.pid) === entry.stub.startTime;
}

/** A live (not zombie) process's start time, from /proc/PID/stat; undefined once it is gone. */
function processStart(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return /^[ZX]/.test(fields[0] ?? 'X') ? undefined : fields[19];
  } catch {
    return undefined;
  }
}

function kill(child: ChildProcess): void {
  try {
    child.kill('SIGKILL');
  } catch {
    // Already gone.
  }
}
