// Turns what happened to a child into a ParserResult, keeping the documented failure table exactly:
// success → ok, data, exit 0; throw → message, exit 1; wall clock → `sandbox timeout`;
// crash or empty output → a message and the exit code; unknown → `Unknown parser: NAME`.
import { availableParallelism, constants } from 'node:os';
import type { NetworkReport, ParserLimits, SandboxErrorCode } from '@coda/sandbox-core';
import type { ResponseErrorKind } from '../protocol/wire.ts';
import type { ChildExit, ConfinementReport } from '../spawn/child.ts';
import type { ReaderState } from './response-reader.ts';
import type { ParserFailure, ParserResult, ParserResultFields } from './result.ts';

/** Why the host killed the child, if it did. */
export type KillReason =
  | { kind: 'timeout' }
  | { kind: 'cancelled'; message: string }
  | { kind: 'memory'; residentBytes: number }
  | { kind: 'output'; message: string };

/** Everything known about a finished call. */
export interface CallOutcome {
  exit: ChildExit;
  reader: ReaderState;
  killed: KillReason | undefined;
  heapExhausted: boolean;
  limits: ParserLimits;
  stderr: string;
  durationMs: number;
  /**
   * How long the child was busy, when longer than the call: a warm spare imports the module
   * (spending CPU under its RLIMIT_CPU) before its call starts.
   */
  lifetimeMs?: number;
  confinement: ConfinementReport;
  /** The egress proxy's report for the child, with a network allowlist. */
  network?: NetworkReport | undefined;
}

const kindCodes: Record<ResponseErrorKind, SandboxErrorCode> = {
  'parser-error': 'RUNTIME',
  'never-settled': 'RUNTIME',
  'load-error': 'RUNTIME',
  'unknown-parser': 'VALIDATION',
  'invalid-result': 'VALIDATION',
  'result-too-large': 'VALIDATION',
  // The Python runner's json module cannot read the request (too deep, an over-long integer).
  'invalid-payload': 'VALIDATION',
  // The Python runner's MemoryError under RLIMIT_AS.
  'memory-exceeded': 'OOM',
};

/** Signal numbers to names; reversed so that the first name wins (SIGABRT over SIGIOT). */
export const signalNames = new Map<number, NodeJS.Signals>(
  Object.entries(constants.signals)
    .reverse()
    .map(([name, number]) => [number, name as NodeJS.Signals]),
);

/**
 * The exit as the runner saw it. A confined child runs under bwrap, which exits with 128 + N
 * when its child died of signal N; report the signal, as for a plain child.
 */
export function effectiveExit(exit: ChildExit, confinement: ConfinementReport): ChildExit {
  if (confinement.sandbox === 'none' || exit.exitCode === null || exit.exitCode <= 128) return exit;
  const signal = signalNames.get(exit.exitCode - 128);
  return signal === undefined ? exit : { ...exit, exitCode: null, signal };
}

/** The result of a finished call. */
export function classify(outcome: CallOutcome): ParserResult {
  const exit = effectiveExit(outcome.exit, outcome.confinement);
  const base: ParserResultFields = {
    timedOut: false,
    exitCode: exit.exitCode,
    durationMs: outcome.durationMs,
    stderr: outcome.stderr,
    confinement: outcome.confinement,
  };
  if (exit.signal !== null) base.signal = exit.signal;
  if (outcome.network !== undefined) base.network = outcome.network;
  const fail = (code: SandboxErrorCode, error: string): ParserFailure => ({
    ...base,
    ok: false,
    code,
    error,
  });
  const { killed, reader, limits } = outcome;
  if (killed?.kind === 'timeout') return { ...fail('TIMEOUT', 'sandbox timeout'), timedOut: true };
  if (killed?.kind === 'cancelled') return fail('CANCELLED', killed.message);
  if (killed?.kind === 'memory') {
    return fail(
      'OOM',
      `memory limit exceeded: ${killed.residentBytes} bytes held (resident, page tables, socket queues), limit ${limits.memoryBytes}`,
    );
  }
  if (killed?.kind === 'output') return fail('VALIDATION', killed.message);
  if (reader.kind === 'complete') {
    const { response } = reader;
    if (!response.ok) return fail(kindCodes[response.kind], response.error);
    if (exit.exitCode === 0) return { ...base, ok: true, data: response.data as never };
    return fail('CRASH', `child ${describeExit(exit)} after its response`);
  }
  if (reader.kind === 'refused' && reader.reason === 'too-large') {
    return fail('VALIDATION', reader.message);
  }
  if (reader.kind === 'refused')
    return fail('CRASH', `child sent a bad response: ${reader.message}`);
  // Each label below from what can have happened, not from what the child can fake (found by
  // an attack review): the kernel's SIGXCPU needs `cpuSecs` of the child's CPU, so at least
  // cpuSecs / cores of wall time (a parser that sent itself one after 36 ms read as the CPU
  // limit); V8's fatal heap error ends a Node child with SIGABRT (or SIGTRAP), so its words on
  // stderr count only then (a parser that logged its payload and exited read as OOM, a Python
  // one too).
  if (exit.signal === 'SIGXCPU') {
    return cpuLimitReachable(outcome.lifetimeMs ?? outcome.durationMs, limits.cpuSecs)
      ? fail('TIMEOUT', `CPU time limit exceeded (${limits.cpuSecs} s)`)
      : fail('CRASH', 'child was killed by SIGXCPU (not by its CPU time limit)');
  }
  if (
    outcome.heapExhausted &&
    outcome.confinement.runtime === 'node' &&
    (exit.signal === 'SIGABRT' || exit.signal === 'SIGTRAP')
  ) {
    return fail('OOM', 'memory limit exceeded: JavaScript heap out of memory');
  }
  if (exit.memoryExceeded === true) {
    return fail('OOM', `memory limit exceeded: the cgroup limit (${limits.memoryBytes} bytes)`);
  }
  if (exit.exitCode === null && exit.signal === null) {
    return fail('CRASH', 'child could not be started');
  }
  return fail('CRASH', `child ${describeExit(exit)} without a response`);
}

/**
 * Accounting steps of the kernel's CPU clock, and CPU spent before the host's clock of the child
 * started (a fork server's child, forked ahead of its call).
 */
const cpuSlackMs = 250;

/** Whether a child alive `lifetimeMs` can have used `cpuSecs` of CPU on this machine. */
function cpuLimitReachable(lifetimeMs: number, cpuSecs: number): boolean {
  return (lifetimeMs + cpuSlackMs) * availableParallelism() >= cpuSecs * 1000;
}

function describeExit(exit: ChildExit): string {
  return exit.signal === null
    ? `exited with code ${exit.exitCode}`
    : `was killed by ${exit.signal}`;
}
