// What the host needs of a started runner child, whichever way it was spawned.
import type { Readable, Writable } from 'node:stream';
import type { NetworkReport } from '@coda/sandbox-core';
import type { Confinement } from '@coda/sandbox-subprocess';

/** How a child ended. */
export interface ChildExit {
  /** The exit code, or null when a signal ended it. */
  exitCode: number | null;
  /** The signal that ended it, if one did. */
  signal: NodeJS.Signals | null;
  /** The memory cgroup recorded that the child hit its limit. */
  memoryExceeded?: boolean;
}

/** Which mechanisms confine a parser child; every result carries it. */
export interface ConfinementReport {
  /**
   * `bubblewrap`: the subprocess layer's namespaces and seccomp apply; `landlock`: its Landlock
   * rules and seccomp apply, without namespaces (where bubblewrap cannot run); `none`: neither.
   */
  sandbox: 'bubblewrap' | 'landlock' | 'none';
  /**
   * The subprocess layer's backend, as its `confinement` names it (`bubblewrap`,
   * `bubblewrap-as-caller`, `landlock`, `rlimits`), when the child went through it.
   */
  backend?: Confinement;
  /**
   * What bounds total memory beyond the V8 heap limit: a cgroup set by the subprocess layer, or
   * the host's resident-memory watchdog (plus RLIMIT_DATA as a backstop), or only the heap limit.
   */
  memory: 'cgroup' | 'rss-watchdog' | 'heap-only';
  /** How CPU time is bounded. */
  cpu: 'rlimit' | 'none';
  /** Which runner the child runs. */
  runtime: 'node' | 'python';
  /** Node's permission model applies (always, for `node` children). */
  permissionModel: boolean;
  /** The Python runner's audit hook applies (always, for `python` children). */
  auditHook: boolean;
  /** Why the sandbox is weaker than full confinement, when it is. */
  degraded?: string;
  /** The subprocess layer's controls that applied (`namespace:net`, `seccomp`, ...), if used. */
  controls?: readonly string[];
}

/** A started runner child. */
export interface ParserChild {
  /** Process id of the spawned process (bwrap's when confined). */
  readonly pid: number | undefined;
  readonly stdin: Writable;
  readonly stdout: Readable;
  readonly stderr: Readable;
  /** The host end of the child's fd 3, the response channel. */
  readonly response: Readable;
  /** The host end of a fork server's fd 4, where its zygote reports each call's end. */
  readonly control?: Readable | undefined;
  /** Settles once the child has exited; never rejects. */
  readonly exited: Promise<ChildExit>;
  /** What confines this child. */
  readonly confinement: ConfinementReport;
  /** Kills the child and everything it started; safe to call more than once. */
  kill(): void;
  /** The egress proxy's report for this child (a confined child under a network allowlist). */
  readonly network?: { report(): NetworkReport } | undefined;
}

/** Builds a {@link ParserChild} from a started process's standard streams and the rest. */
export function toParserChild(
  process: Pick<ParserChild, 'stdin' | 'stdout' | 'stderr'> & { pid?: number | undefined },
  rest: Pick<ParserChild, 'response' | 'control' | 'exited' | 'confinement' | 'kill' | 'network'>,
): ParserChild {
  const { pid, stdin, stdout, stderr } = process;
  return { pid, stdin, stdout, stderr, ...rest };
}

/** The second line inside the interpreter: Node's permission model, or the Python audit hook. */
export function interpreterGuard(
  runtime: 'node' | 'python',
): Pick<ConfinementReport, 'runtime' | 'permissionModel' | 'auditHook'> {
  return { runtime, permissionModel: runtime === 'node', auditHook: runtime === 'python' };
}
