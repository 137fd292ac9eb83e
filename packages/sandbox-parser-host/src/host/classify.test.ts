import { defaultParserLimits } from '@coda/sandbox-core';
import { describe, expect, it } from 'vitest';
import type { ConfinementReport } from '../spawn/child.ts';
import { type CallOutcome, classify, effectiveExit } from './classify.ts';

const plain: ConfinementReport = {
  sandbox: 'none',
  memory: 'rss-watchdog',
  cpu: 'rlimit',
  runtime: 'node',
  permissionModel: true,
  auditHook: false,
};
const confined: ConfinementReport = { ...plain, sandbox: 'bubblewrap', memory: 'cgroup' };

function outcome(overrides: Partial<CallOutcome>): CallOutcome {
  return {
    exit: { exitCode: 0, signal: null },
    reader: { kind: 'reading' },
    killed: undefined,
    heapExhausted: false,
    limits: { ...defaultParserLimits },
    stderr: '',
    durationMs: 1,
    confinement: plain,
    ...overrides,
  };
}

describe('classify', () => {
  it('reads bubblewrap exit codes 128 + N as signal N, plain ones as they are', () => {
    expect(effectiveExit({ exitCode: 152, signal: null }, confined)).toEqual({
      exitCode: null,
      signal: 'SIGXCPU',
    });
    expect(effectiveExit({ exitCode: 134, signal: null }, confined).signal).toBe('SIGABRT');
    expect(effectiveExit({ exitCode: 152, signal: null }, plain)).toEqual({
      exitCode: 152,
      signal: null,
    });
  });

  it('a timeout wins over a response that came too late', () => {
    const result = classify(
      outcome({
        exit: { exitCode: null, signal: 'SIGKILL' },
        reader: { kind: 'complete', response: { ok: true, data: 1 } },
        killed: { kind: 'timeout' },
      }),
    );
    expect(result).toMatchObject({ ok: false, timedOut: true, error: 'sandbox timeout' });
  });

  it('an ok response counts only with exit code 0', () => {
    const response = { kind: 'complete', response: { ok: true, data: 'x' } } as const;
    expect(classify(outcome({ reader: response }))).toMatchObject({ ok: true, data: 'x' });
    expect(
      classify(outcome({ reader: response, exit: { exitCode: null, signal: 'SIGKILL' } })),
    ).toMatchObject({
      ok: false,
      code: 'CRASH',
      error: 'child was killed by SIGKILL after its response',
    });
  });

  it('labels what the child can fake only when it can have happened', () => {
    const early = outcome({
      exit: { exitCode: 152, signal: null },
      confinement: confined,
      durationMs: 1,
    });
    const heapWordsThenExit = outcome({ exit: { exitCode: 3, signal: null }, heapExhausted: true });
    const heapWordsFromPython = outcome({
      exit: { exitCode: null, signal: 'SIGABRT' },
      heapExhausted: true,
      confinement: { ...plain, runtime: 'python', permissionModel: false, auditHook: true },
    });
    expect([early, heapWordsThenExit, heapWordsFromPython].map(classify)).toMatchObject([
      { code: 'CRASH', error: 'child was killed by SIGXCPU (not by its CPU time limit)' },
      { code: 'CRASH', error: 'child exited with code 3 without a response' },
      { code: 'CRASH', error: 'child was killed by SIGABRT without a response' },
    ]);
  });

  it('no response: CPU limit, heap, cgroup memory, then a plain crash', () => {
    // cpuSecs 5 (the default limits) is at least 5000 ms / cores of wall time: 5 s is enough
    // on any machine, 1 ms on none.
    const cpu = outcome({
      exit: { exitCode: 152, signal: null },
      confinement: confined,
      durationMs: 5_000,
    });
    expect(classify(cpu)).toMatchObject({ code: 'TIMEOUT', signal: 'SIGXCPU', exitCode: null });
    const heap = outcome({ exit: { exitCode: null, signal: 'SIGABRT' }, heapExhausted: true });
    expect(classify(heap)).toMatchObject({ code: 'OOM' });
    const cgroup = outcome({
      exit: { exitCode: 137, signal: null, memoryExceeded: true },
      confinement: confined,
    });
    expect(classify(cgroup)).toMatchObject({
      code: 'OOM',
      signal: 'SIGKILL',
      error: 'memory limit exceeded: the cgroup limit (268435456 bytes)',
    });
    expect(classify(outcome({ exit: { exitCode: null, signal: null } }))).toMatchObject({
      code: 'CRASH',
      error: 'child could not be started',
    });
  });
});
