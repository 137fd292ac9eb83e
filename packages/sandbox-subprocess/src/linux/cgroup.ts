// Per-run cgroups: a memory limit that counts resident memory (and does not stop V8, Go or JVM
// programs from starting, unlike RLIMIT_AS), a pids limit against fork bombs, and a handle that
// kills every process of the run, setsid daemons and double forks included. cgroup v2 is used
// when this process sits in a delegated group with the controllers enabled; v1 hierarchies
// (hybrid hosts) when writable; otherwise the caller falls back to rlimits and says so.
import {
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmdirSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { mkdir, rmdir } from 'node:fs/promises';
import { dirname } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { SandboxControl } from '../process/controls.ts';

type Controller = 'memory' | 'pids';

interface Hierarchy {
  readonly version: 1 | 2;
  /** This process's base group for runs (created on first use). */
  readonly base: string;
}

/** Which cgroup hierarchies can hold runs' limits on this host. */
export interface CgroupSupport {
  readonly memory: Hierarchy | undefined;
  readonly pids: Hierarchy | undefined;
}

let cached: CgroupSupport | undefined;
let runCounter = 0;

/** Finds writable cgroup hierarchies for memory and pids once per process. */
export function detectCgroups(): CgroupSupport {
  cached ??= probe();
  return cached;
}

function probe(): CgroupSupport {
  if (process.platform !== 'linux') return { memory: undefined, pids: undefined };
  let mountinfo: string;
  let membership: string;
  try {
    mountinfo = readFileSync('/proc/self/mountinfo', 'utf8');
    membership = readFileSync('/proc/self/cgroup', 'utf8');
  } catch {
    return { memory: undefined, pids: undefined };
  }
  const pick = (controller: Controller): Hierarchy | undefined => {
    for (const group of ownGroups(mountinfo, membership, controller)) {
      if (group.version === 2 && !controllerEnabled(group.dir, controller)) continue;
      removeStaleBases(group.dir);
      const base = `${group.dir}/coda-sandbox-${process.pid}`;
      const usable = usableBase({ version: group.version, base }, controller);
      if (usable !== undefined) return usable;
    }
    return undefined;
  };
  return { memory: pick('memory'), pids: pick('pids') };
}

/** This process's own group in a hierarchy that can carry `controller`. */
export interface OwnGroup {
  readonly version: 1 | 2;
  /** Absolute directory of the group in this mount namespace. */
  readonly dir: string;
}

/**
 * Where this process's own group is, for each mounted hierarchy that can carry `controller`:
 * cgroup v2 first, then a v1 hierarchy with that controller. Pure: takes the text of
 * /proc/self/mountinfo and /proc/self/cgroup. A mount's root (a container's view of the
 * hierarchy) is stripped from the group path.
 */
export function ownGroups(
  mountinfo: string,
  membership: string,
  controller: Controller,
): OwnGroup[] {
  const mounts = parseMounts(mountinfo);
  const groups = parseMembership(membership);
  const found: OwnGroup[] = [];
  const v2 = mounts.find((mount) => mount.type === 'cgroup2');
  const v2Path = groups.get('');
  if (v2 !== undefined && v2Path !== undefined) {
    const dir = groupDir(v2, v2Path);
    if (dir !== undefined) found.push({ version: 2, dir });
  }
  const v1 = mounts.find((mount) => mount.type === 'cgroup' && mount.options.includes(controller));
  const v1Path = groups.get(controller);
  if (v1 !== undefined && v1Path !== undefined) {
    const dir = groupDir(v1, v1Path);
    if (dir !== undefined) found.push({ version: 1, dir });
  }
  return found;
}

interface Mount {
  /** The directory of the hierarchy that is mounted (`/` unless a container sees a part). */
  readonly root: string;
  readonly point: string;
  readonly type: string;
  readonly options: readonly string[];
}

function parseMounts(mountinfo: string): Mount[] {
  const decode = (field: string): string => field.replace(/\\040/g, ' ');
  return mountinfo
    .split('\n')
    .filter((line) => line.includes(' - cgroup'))
    .map((line) => {
      const [before = '', after = ''] = line.split(' - ');
      const fields = before.split(' ');
      const [type = '', , superOptions = ''] = after.split(' ');
      return {
        root: decode(fields[3] ?? '/'),
        point: decode(fields[4] ?? ''),
        type,
        options: superOptions.split(','),
      };
    });
}

/** controller (or '' for v2) to this process's path in that hierarchy. */
function parseMembership(text: string): Map<string, string> {
  const groups = new Map<string, string>();
  for (const line of text.split('\n')) {
    const match = /^\d+:([^:]*):(.*)$/.exec(line);
    if (match === null) continue;
    for (const controller of match[1]!.split(',')) groups.set(controller, match[2]!);
  }
  return groups;
}

/** The group's directory under the mount, or undefined when the mount does not show it. */
function groupDir(mount: Mount, path: string): string | undefined {
  const root = mount.root === '/' ? '' : mount.root;
  if (root !== '' && path !== root && !path.startsWith(`${root}/`)) return undefined;
  const relative = path.slice(root.length);
  return `${mount.point}${relative === '/' ? '' : relative}`;
}

function controllerEnabled(dir: string, controller: Controller): boolean {
  try {
    return readFileSync(`${dir}/cgroup.subtree_control`, 'utf8').split(/\s+/).includes(controller);
  } catch {
    return false;
  }
}

const createdBases = new Set<string>();
/** A base untouched this long, whose host pid is gone, is considered left behind. */
const staleAfterMs = 60_000;

/**
 * Removes the empty run groups and bases that hosts which died without cleaning up (SIGKILL,
 * a crash) left next to ours: `coda-sandbox-<pid>` whose pid is gone. A group that still
 * holds a process is left alone (rmdir refuses it).
 */
export function removeStaleBases(dir: string): void {
  let entries: string[];
  try {
    entries = readdirSync(dir);
  } catch {
    return;
  }
  for (const entry of entries) {
    const match = /^coda-sandbox-(\d+)$/.exec(entry);
    if (match === null || Number(match[1]) === process.pid || isAlive(Number(match[1]))) continue;
    const base = `${dir}/${entry}`;
    try {
      // A host in another pid namespace looks dead from here; a base it touched lately (groups
      // created or removed) is left alone, and a host that finds its base gone re-creates it.
      if (Date.now() - statSync(base).mtimeMs < staleAfterMs) continue;
      for (const child of readdirSync(base, { withFileTypes: true })) {
        if (child.isDirectory()) tryRmdir(`${base}/${child.name}`);
      }
      rmdirSync(base);
    } catch {
      // Busy or not ours to remove: leave it.
    }
  }
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

function usableBase(hierarchy: Hierarchy, controller: Controller): Hierarchy | undefined {
  try {
    if (!existsSync(hierarchy.base)) {
      mkdirSync(hierarchy.base);
      createdBases.add(hierarchy.base);
    }
    const limitFile =
      controller === 'pids'
        ? 'pids.max'
        : hierarchy.version === 2
          ? 'memory.max'
          : 'memory.limit_in_bytes';
    if (hierarchy.version === 2) {
      writeFileSync(`${hierarchy.base}/cgroup.subtree_control`, `+${controller}`);
    }
    const probeDir = `${hierarchy.base}/probe`;
    mkdirSync(probeDir, { recursive: true });
    const ok = existsSync(`${probeDir}/${limitFile}`);
    rmdirSync(probeDir);
    if (createdBases.size === 1 && ok) process.once('exit', removeBases);
    return ok ? hierarchy : undefined;
  } catch {
    return undefined;
  }
}

/** Removes this process's (empty) base groups; also run at exit. */
export function removeBases(): void {
  for (const base of createdBases) {
    try {
      rmdirSync(base);
    } catch {
      // Still busy or already gone: nothing a dying process can do about it.
    }
  }
}

/** The limits one run asks of its cgroups. */
export interface RunCgroupLimits {
  /** Bytes, or 0 for none. */
  readonly memoryBytes: number;
  /** Processes and threads, or 0 for none. */
  readonly pids: number;
}

/** The cgroups of one run. */
export interface RunCgroups {
  /** `cgroup.procs` files the run's first process must join before it execs. */
  readonly procsFiles: readonly string[];
  /** Controls these groups enforce. */
  readonly controls: readonly SandboxControl[];
  /** SIGKILLs every process in the groups until a round finds none it has not signalled. */
  kill(): Promise<void>;
  /** Synchronous kill for `execSync`. */
  killSync(): void;
  /**
   * Writes the run's limits (only those that differ from what the groups hold). Used when a
   * group was created ahead of the run, before its limits were known.
   */
  setLimits(limits: RunCgroupLimits): void;
  /** Whether the kernel's OOM killer fired inside the memory group. */
  memoryExceeded(): boolean;
  /** Removes the groups (after `kill`), retrying while dying processes leave them. */
  remove(): Promise<void>;
  removeSync(): void;
}

/**
 * Like {@link createRunCgroups}, but creates the directories on libuv's thread pool: a cgroup
 * mkdir waits for the kernel's cgroup mutex, which a concurrent removal can hold for a while.
 * For warm launchers, which are prepared in the background.
 */
export async function createRunCgroupsInBackground(
  support: CgroupSupport,
  limits: RunCgroupLimits,
  planned: PlannedRunGroups = planRunGroups(support, limits),
): Promise<RunCgroups | undefined> {
  // A failure is handled by the synchronous path below (it re-creates a removed base).
  await Promise.allSettled(planned.procsFiles.map((file) => mkdir(dirname(file))));
  return createRunCgroups(support, limits, planned.name);
}

/** The name and `cgroup.procs` files a run's groups will have, before they exist. */
export interface PlannedRunGroups {
  readonly name: string;
  readonly procsFiles: readonly string[];
}

/**
 * Names a run's groups without creating them (as createRunCgroups would lay them out), so that
 * a process that must remove them can be told their paths first.
 */
export function planRunGroups(support: CgroupSupport, limits: RunCgroupLimits): PlannedRunGroups {
  const name = `run-${++runCounter}`;
  const dirs = new Set<string>();
  if (limits.memoryBytes > 0 && support.memory !== undefined) {
    dirs.add(`${support.memory.base}/${name}`);
  }
  if (limits.pids > 0 && support.pids !== undefined) dirs.add(`${support.pids.base}/${name}`);
  return { name, procsFiles: [...dirs].map((dir) => `${dir}/cgroup.procs`) };
}

/** Creates the cgroups for one run, or returns `undefined` when none apply. */
export function createRunCgroups(
  support: CgroupSupport,
  limits: RunCgroupLimits,
  name = `run-${++runCounter}`,
): RunCgroups | undefined {
  const dirs = new Map<string, Hierarchy>();
  const controls: SandboxControl[] = [];
  let memoryDir: string | undefined;
  let pidsDir: string | undefined;
  let written: RunCgroupLimits = { memoryBytes: 0, pids: 0 };
  let socketsBounded = false;
  try {
    if (limits.memoryBytes > 0 && support.memory !== undefined) {
      const dir = `${support.memory.base}/${name}`;
      makeRunGroup(dir, support.memory, 'memory');
      dirs.set(dir, support.memory);
      memoryDir = dir;
      socketsBounded = writeMemoryLimit(dir, support.memory.version, limits.memoryBytes);
      written = { ...written, memoryBytes: limits.memoryBytes };
      controls.push(
        support.memory.version === 2
          ? SandboxControl.memoryCgroupV2
          : SandboxControl.memoryCgroupV1,
      );
      if (socketsBounded) controls.push(SandboxControl.memorySocketBuffers);
    }
    if (limits.pids > 0 && support.pids !== undefined) {
      const dir = `${support.pids.base}/${name}`;
      if (!dirs.has(dir)) makeRunGroup(dir, support.pids, 'pids');
      dirs.set(dir, support.pids);
      pidsDir = dir;
      writeFileSync(`${dir}/pids.max`, String(limits.pids));
      written = { ...written, pids: limits.pids };
      controls.push(
        support.pids.version === 2 ? SandboxControl.pidsCgroupV2 : SandboxControl.pidsCgroupV1,
      );
    }
  } catch {
    for (const dir of dirs.keys()) tryRmdir(dir);
    return undefined;
  }
  if (dirs.size === 0) return undefined;
  controls.push(SandboxControl.killCgroup);
  const list = [...dirs.keys()];
  return {
    procsFiles: list.map((dir) => `${dir}/cgroup.procs`),
    controls,
    async kill() {
      const killed = new Set<number>();
      for (let round = 0; round < 200 && killRound(list, dirs, killed) > 0; round++) {
        // Only processes not signalled yet count: a SIGKILLed process never runs user code
        // again, even while the kernel still tears it down (a dying namespace init can take
        // milliseconds). Re-reading catches forks that raced the previous round.
        if (round > 2) await sleep(1);
      }
    },
    killSync() {
      const killed = new Set<number>();
      for (let round = 0; round < 200 && killRound(list, dirs, killed) > 0; round++) {
        if (round > 2) Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 1);
      }
    },
    setLimits(next) {
      if (
        memoryDir !== undefined &&
        next.memoryBytes > 0 &&
        next.memoryBytes !== written.memoryBytes
      ) {
        const bounded = writeMemoryLimit(memoryDir, dirs.get(memoryDir)!.version, next.memoryBytes);
        // The launcher's controls say the socket buffers are bounded: they must stay so.
        if (socketsBounded && !bounded) throw new Error('socket buffer limit not taken');
      }
      if (pidsDir !== undefined && next.pids > 0 && next.pids !== written.pids) {
        writeFileSync(`${pidsDir}/pids.max`, String(next.pids));
      }
      written = next;
    },
    memoryExceeded() {
      return memoryDir !== undefined && oomKills(memoryDir, dirs.get(memoryDir)!.version) > 0;
    },
    async remove() {
      // Killed processes may still be leaving the groups; retry for a while. rmdir runs on
      // libuv's thread pool: a memory group's teardown never blocks the event loop.
      let pending = list;
      for (let round = 0; round < 200 && pending.length > 0; round++) {
        if (round > 0) await sleep(10);
        const removed = await Promise.all(pending.map(tryRmdirAsync));
        pending = pending.filter((_, index) => !removed[index]);
      }
    },
    removeSync() {
      for (let round = 0; round < 50; round++) {
        if (list.every(tryRmdir)) return;
        Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 10);
      }
    },
  };
}

/** Creates a run's group; re-creates the base first when someone removed it meanwhile. */
function makeRunGroup(dir: string, hierarchy: Hierarchy, controller: Controller): void {
  try {
    mkdirSync(dir);
  } catch (error) {
    // Run names are unique in this process: an existing one was made by createRunCgroupsInBackground.
    if ((error as NodeJS.ErrnoException).code === 'EEXIST') return;
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    mkdirSync(hierarchy.base, { recursive: true });
    createdBases.add(hierarchy.base);
    if (hierarchy.version === 2) {
      writeFileSync(`${hierarchy.base}/cgroup.subtree_control`, `+${controller}`);
    }
    mkdirSync(dir);
  }
}

/**
 * Writes the memory limit; returns whether the kernel also bounds the socket buffers the group
 * makes it hold, as verified now. cgroup v2 charges them to `memory.max` (its `memory.stat` has
 * a `sock` line) unless the kernel was booted with `cgroup.memory=nosocket`. cgroup v1 charges
 * kernel memory such as pipe buffers to the limit, but TCP buffers only to their own counter,
 * and only once `memory.kmem.tcp.limit_in_bytes` is set: it gets a quarter of the limit, read
 * back to check the kernel took it.
 */
function writeMemoryLimit(dir: string, version: 1 | 2, bytes: number): boolean {
  if (version === 2) {
    writeFileSync(`${dir}/memory.max`, String(bytes));
    tryWrite(`${dir}/memory.swap.max`, '0');
    return socketsCharged() && /^sock \d+$/m.test(tryRead(`${dir}/memory.stat`));
  }
  // memory+swap must stay >= memory: raising writes it first (lowering makes that first
  // write fail harmlessly), and without it the group could swap past its limit.
  tryWrite(`${dir}/memory.memsw.limit_in_bytes`, String(bytes));
  writeFileSync(`${dir}/memory.limit_in_bytes`, String(bytes));
  tryWrite(`${dir}/memory.memsw.limit_in_bytes`, String(bytes));
  const tcp = tcpBufferBudget(bytes);
  const file = `${dir}/memory.kmem.tcp.limit_in_bytes`;
  return tryWrite(file, String(tcp)) && tryRead(file).trim() === String(tcp);
}

/** The TCP buffer budget of a cgroup v1 group with memory limit `bytes`: a quarter, in pages. */
export function tcpBufferBudget(bytes: number): number {
  return Math.max(4096, Math.floor(bytes / 4 / 4096) * 4096);
}

let socketsChargedCache: boolean | undefined;
/** Whether the kernel was booted without `cgroup.memory=nosocket` (or `nokmem`). */
function socketsCharged(): boolean {
  socketsChargedCache ??= !/\bcgroup\.memory=\S*(nosocket|nokmem)/.test(tryRead('/proc/cmdline'));
  return socketsChargedCache;
}

function tryRead(file: string): string {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return '';
  }
}

/**
 * Sends SIGKILL to every process in the groups not signalled before (`killed`); returns how
 * many new ones it found. cgroup v2's `cgroup.kill` kills the whole group atomically, forks
 * in flight included, so nothing is new after it.
 */
function killRound(
  list: readonly string[],
  dirs: ReadonlyMap<string, Hierarchy>,
  killed: Set<number>,
): number {
  let fresh = 0;
  for (const dir of list) {
    if (dirs.get(dir)!.version === 2 && tryWrite(`${dir}/cgroup.kill`, '1')) {
      for (const pid of readPids(dir)) killed.add(pid);
      continue;
    }
    for (const pid of readPids(dir)) {
      if (killed.has(pid)) continue;
      killed.add(pid);
      fresh++;
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // Already gone.
      }
    }
  }
  return fresh;
}

function readPids(dir: string): number[] {
  try {
    return readFileSync(`${dir}/cgroup.procs`, 'utf8')
      .split('\n')
      .filter((line) => line !== '')
      .map(Number);
  } catch {
    return [];
  }
}

function oomKills(dir: string, version: 1 | 2): number {
  try {
    const text = readFileSync(
      `${dir}/${version === 2 ? 'memory.events' : 'memory.oom_control'}`,
      'utf8',
    );
    const match = /^oom_kill (\d+)$/m.exec(text);
    if (match !== null) return Number(match[1]);
    if (version === 1)
      return Number(readFileSync(`${dir}/memory.failcnt`, 'utf8').trim()) > 0 ? 1 : 0;
  } catch {
    // The group is gone; nothing to report.
  }
  return 0;
}

function tryWrite(file: string, value: string): boolean {
  try {
    writeFileSync(file, value);
    return true;
  } catch {
    return false;
  }
}

async function tryRmdirAsync(dir: string): Promise<boolean> {
  try {
    await rmdir(dir);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'ENOENT';
  }
}

function tryRmdir(dir: string): boolean {
  try {
    rmdirSync(dir);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'ENOENT';
  }
}
