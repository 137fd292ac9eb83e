// attack-35: how an execution's outcome is decided when the worker that ran it dies. Each row
// asserts the outcome the execution's own history calls for (what happened to IT), whichever
// code path noticed the death first.
import type { TerminalEvent } from '@coda/sandbox-core';
import { expect, it } from 'vitest';
import { SandboxEngine } from '../src/index.ts';
import { workerDeathLog } from './helpers.ts';

const shape = (event: TerminalEvent) => {
  if (event.type === 'result') return { type: event.type, payload: event.payload };
  const details = event.details as { collateral?: boolean; replayDiverged?: boolean } | undefined;
  const shaped: Record<string, unknown> = {
    type: event.type,
    code: event.code,
    collateral: details?.collateral,
  };
  if (details?.replayDiverged !== undefined) shaped.replayDiverged = details.replayDiverged;
  return shaped;
};

/** Blocks the host's event loop for `ms` from its check phase: the next turn runs timers first. */
const blockHostSoon = (ms: number) =>
  setImmediate(() => {
    const until = performance.now() + ms;
    while (performance.now() < until) {
      // A loaded host: the worker's messages wait in the pipe, the supervisor's timer is due.
    }
  });

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

// Finding 1. A cancelled execution's worker confirms the abort at once, but the host is busy for
// longer than the abort grace (2 s): when its event loop turns again the supervisor's sampler runs
// before the pipe is read, sees the abort unanswered and kills the worker with BOTH executions in
// it. The cancelled one's `done` is then read (it leaves); at the exit the co-tenant is the only
// job left, and `isOwnDeath` (others === 0 at the close, not at the kill) calls the death its own:
// it ends CRASH ("The execution's worker process died"), not run again, its result lost. It was
// in the worker with the job the kill was for: it must run again and finish.
it('a co-tenant of a job whose abort the host saw late is run again, not blamed', async () => {
  const { logger, deaths } = workerDeathLog();
  const engine = new SandboxEngine({ workers: 1, logger, dataHandler: () => 'ok' });
  try {
    await engine.ready();
    const cancelled = engine.submit({
      code: "await dataProxy.request({ who: 'a' }); await new Promise((r) => setTimeout(r, 60_000)); return 'a'",
    });
    const cotenant = engine.submit({
      code: "await dataProxy.request({ who: 'y' }); await new Promise((r) => setTimeout(r, 5_000)); return 'y'",
    });
    // Both run in the one worker, past their data request.
    await sleep(1_500);
    cancelled.cancel('user left');
    blockHostSoon(2_600);
    const [a, y] = await Promise.all([cancelled.result, cotenant.result]);
    expect({ a: shape(a), y: shape(y) }).toEqual({
      a: { type: 'error', code: 'CANCELLED', collateral: undefined },
      y: { type: 'result', payload: 'y' },
    });
    // The scenario is real: the worker was killed for the unanswered abort.
    expect(deaths.map((death) => (death as { reason?: string }).reason)).toContain(
      'abort-unanswered',
    );
  } finally {
    await engine.dispose();
  }
}, 60_000);

// Finding 1, second face. The host kills the worker for a job's time (its backstop, timeoutMs +
// 2 s) while that job's own TIMEOUT already waits in the pipe. The co-tenant, left alone at the
// exit, is handed on as `alone` with the death's own error (CRASH, no `collateral`) as the error
// it ends with if its second run diverges: a co-tenant whose output depends on chance is told the
// worker's death was its own. It was not alone: it must end as collateral of a diverged replay.
it('a co-tenant of a job killed for its time is collateral even if that job answered late', async () => {
  const { logger, deaths } = workerDeathLog();
  const engine = new SandboxEngine({ workers: 1, logger });
  try {
    await engine.ready();
    const looper = engine.submit({ code: 'for (;;) {}', limits: { timeoutMs: 500 } });
    const cotenant = engine.submit({
      code: "console.log(String(Math.random())); await new Promise((r) => setTimeout(r, 5_000)); return 'y'",
    });
    // Past the looper's host deadline (500 ms + 2 s) before its TIMEOUT is read.
    blockHostSoon(3_200);
    const [x, y] = await Promise.all([looper.result, cotenant.result]);
    expect({ x: shape(x), y: shape(y) }).toEqual({
      x: { type: 'error', code: 'TIMEOUT', collateral: undefined },
      y: { type: 'error', code: 'CRASH', collateral: true, replayDiverged: true },
    });
    expect(deaths.map((death) => (death as { reason?: string }).reason)).toContain('deadline');
  } finally {
    await engine.dispose();
  }
}, 60_000);
