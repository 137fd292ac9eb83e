// attack-35: how an execution's outcome is decided when the worker that ran it dies. Each row
// asserts the outcome the execution's own history calls for (what happened to IT), whichever
// code path noticed the death first.
import { readFileSync } from 'node:fs';
import type { TerminalEvent } from '@coda/sandbox-core';
import { expect, it } from 'vitest';
import { SandboxEngine } from '../src/index.ts';
import { killedAloneByMemory, runLeavingMemory, workerDeathLog } from './helpers.ts';

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

/** Blocks the host's event loop for `ms`: the worker's messages wait in the pipe meanwhile. */
function blockHost(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until) {
    // A loaded host.
  }
}

/**
 * Blocks the host from its check phase: its next turn runs the supervisor's due timer before it
 * reads what the worker sent meanwhile.
 */
const blockHostSoon = (ms: number) => setImmediate(() => blockHost(ms));

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
    // The abort goes out, and the host is busy before it could read the answer.
    setImmediate(() => {
      cancelled.cancel('user left');
      blockHost(2_600);
    });
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

/**
 * A 16 MiB sleeper that prints a random number (so a second run diverges) beside an execution
 * that leaves memory resident; with `blockAtKill`, the host is busy for 300 ms in the turn in
 * which the worker stops being alive. Returns what the two ended with and whether the memory
 * bound killed the worker holding only the sleeper (the scenario is real).
 */
async function sleeperBesideLeftovers(blockAtKill: boolean) {
  const { logger, deaths } = workerDeathLog();
  const engine = new SandboxEngine({ workers: 1, logger });
  try {
    await engine.ready();
    let watching = blockAtKill;
    const watch = () => {
      if (!watching) return;
      if (engine.stats().workerPids.length === 0) {
        watching = false;
        blockHost(300);
        return;
      }
      setImmediate(watch);
    };
    const sleeper = engine.run({
      code: "console.log(String(Math.random())); await new Promise((r) => setTimeout(r, 3_000)); return 'slept'",
      limits: { memoryMb: 16, timeoutMs: 20_000 },
    });
    const allocator = await runLeavingMemory(engine);
    watch();
    const slept = await sleeper;
    watching = false;
    return {
      allocator: shape(allocator),
      sleeper: shape(slept),
      killed: killedAloneByMemory(deaths),
    };
  } finally {
    await engine.dispose();
  }
}

/** What the two must end with: the sleeper used nothing, its diverged second run is collateral. */
const besideLeftovers = {
  allocator: { type: 'result', payload: 40_000 },
  sleeper: { type: 'error', code: 'CRASH', collateral: true, replayDiverged: true },
  killed: true,
};

// Finding 2. An execution alone at a memory-bound kill after once sharing the worker ends, when
// its second run diverges, with the OOM of that death: "nobody else was there to cause it". But
// what a co-tenant that just finished left resident counts against it (memory-left-by-a-co-tenant):
// here a 16 MiB execution that only sleeps, and prints a random number, is killed by the bound
// within 50 ms of a 1 024 MiB co-tenant's end and told it ran out of memory. It used none: a
// diverged second run of an innocent is collateral (CRASH, collateral, replayDiverged), never OOM.
it('an execution killed by the memory a finished co-tenant left is never OOM', async () => {
  expect(await sleeperBesideLeftovers(false)).toEqual(besideLeftovers);
}, 60_000);

/**
 * A 32 MiB hog that prints a random number (so a second run diverges) and then fills an array V8
 * cannot interrupt, with `other` submitted `afterMs` later to the same worker. Returns what the
 * two ended with.
 */
async function hogBeside(other: { code: string; limits: { memoryMb: number } }, afterMs: number) {
  const engine = new SandboxEngine({ workers: 1, logger: workerDeathLog().logger });
  try {
    await engine.ready();
    const hog = engine.run({
      code: 'console.log(String(Math.random())); await null; Array(1e9).fill(0); return 1',
      limits: { memoryMb: 32, timeoutMs: 20_000 },
    });
    if (afterMs > 0) await sleep(afterMs);
    const beside = engine.run({ ...other, limits: { ...other.limits, timeoutMs: 20_000 } });
    const [h, b] = await Promise.all([hog, beside]);
    return { hog: shape(h), other: shape(b) };
  } finally {
    await engine.dispose();
  }
}

// Finding 3. A hog alone in its worker, printing a random number, then filling an
// array V8 cannot interrupt; a small job is dispatched to the same worker while the hog grows,
// just before the memory bound kills it. Both are "shared" at the kill, so both run again; the
// hog's second run diverges at its first status event and ends as the collateral of a diverged
// replay (CRASH, collateral) although it alone grew the worker: it must end OOM. The newcomer,
// innocent, must finish. The host cannot tell which of the two grew the worker; the second runs
// can: the hog's, muted for its divergence, goes on filling and passes its bound alone, a death
// that is its own. (Until stop 39 a divergence stopped the second run, and the stop raced the fill:
// answered before the fill began, it ended the hog collateral, in 3 of 14 runs of this file on an
// idle 2-core machine and 3 of 3 beside two busy loops.)
it('a hog a newcomer joined just before the memory bound still ends OOM', async () => {
  const newcomer = {
    code: "await new Promise((r) => setTimeout(r, 3_000)); return 'n'",
    limits: { memoryMb: 32 },
  };
  expect(await hogBeside(newcomer, 300)).toEqual({
    hog: { type: 'error', code: 'OOM', collateral: undefined },
    other: { type: 'result', payload: 'n' },
  });
}, 60_000);

// Finding 2, second face. The same leftovers, and the host busy for a moment right after the
// kill: the supervisor's sampler ran once more before the exit was seen, read the killed
// process's memory as nothing, and so found the sleeper "within its bound while alone": OOM again.
// The facts of a death are those at the kill.
it('a sample of the dying worker does not turn leftovers into the survivor’s OOM', async () => {
  expect(await sleeperBesideLeftovers(true)).toEqual(besideLeftovers);
}, 60_000);

// Finding 2's other side. A hog that passed its OWN allowance
// (workerBaseMemoryMb + 3 × 32 MiB) while a 128 MiB co-tenant's allowance still covered the
// worker, the co-tenant then leaving: at the first sample alone the worker is over the hog's
// bound, exactly as with a co-tenant's leftovers, and the host cannot tell the two apart (it has
// the worker's memory, not each execution's). Presumed innocent, the hog runs again and
// diverges; that second run, muted, then passes its bound alone: OOM, not the collateral
// CRASH { replayDiverged } its divergence alone would give.
it('a hog masked by a co-tenant’s allowance, then left alone, still ends OOM', async () => {
  const cotenant = {
    code: "await new Promise((r) => setTimeout(r, 1_500)); return 'c'",
    limits: { memoryMb: 128 },
  };
  expect(await hogBeside(cotenant, 0)).toEqual({
    hog: { type: 'error', code: 'OOM', collateral: undefined },
    other: { type: 'result', payload: 'c' },
  });
}, 60_000);

// Finding 4. Two executions share a worker; one prints a random number and then makes V8 abort the
// process ('x'.repeat(2 ** 28).split(''): "Fatal JavaScript invalid size error"). Both run again
// alone. The killer's second run diverges at its first status event and is muted; its
// synchronous code then kills its worker again, alone: that death is its own (CRASH without
// `collateral`), not the collateral of a diverged replay ("another execution killed" the
// worker). The co-tenant finishes.
it('a killer whose diverged second run kills its worker alone ends with its own CRASH', async () => {
  const { logger } = workerDeathLog();
  const engine = new SandboxEngine({ workers: 1, logger });
  try {
    await engine.ready();
    const killer = engine.run({
      code: "console.log(String(Math.random())); return 'x'.repeat(2 ** 28).split('').length",
    });
    const cotenant = engine.run({
      code: "await new Promise((r) => setTimeout(r, 500)); return 'c'",
    });
    const [k, c] = await Promise.all([killer, cotenant]);
    expect({ killer: shape(k), cotenant: shape(c) }).toEqual({
      killer: { type: 'error', code: 'CRASH', collateral: undefined },
      cotenant: { type: 'result', payload: 'c' },
    });
  } finally {
    await engine.dispose();
  }
}, 60_000);

/** Resident memory of process `pid`, in MiB. */
function residentMb(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+) kB/.exec(status)?.[1] ?? 0) / 1024;
}

// Finding 2, third face. What a finished co-tenant left resident sits just under the survivor's
// bound; the survivor then uses a fraction of its own memory (about 90 MB of its 128 MiB) and the
// worker crosses the bound. The worker was within the bound after the co-tenant left, but the
// survivor did not pass its own allowance: the leftovers took the headroom. It must run again
// (alone, in a fresh worker) and return, not end OOM.
it('a survivor that uses its own memory on top of a co-tenant’s leftovers is not OOM', async () => {
  const { logger, deaths } = workerDeathLog();
  const engine: SandboxEngine = new SandboxEngine({
    workers: 1,
    logger,
    workerBaseMemoryMb: 128,
    dataHandler: async (): Promise<number> => {
      await allocated;
      await sleep(200);
      const pid: number = engine.stats().workerPids[0]!;
      // Enough to cross the worker's bound (128 + 3 × 128 MiB) by 10 MiB from where it is now.
      return Math.round((512 + 10 - residentMb(pid)) * 1_048_576);
    },
  });
  let markAllocated: () => void = () => {};
  const allocated = new Promise<void>((resolve) => {
    markAllocated = resolve;
  });
  try {
    await engine.ready();
    const survivor = engine.run({
      code: `const n = await dataProxy.request({});
        if (n <= 0 || n > 120e6) return 'scenario not met: ' + n;
        const keep = new Uint8Array(n).fill(1);
        await new Promise((r) => setTimeout(r, 1_000));
        return keep.length > 0 ? 'done' : 'empty'`,
      limits: { memoryMb: 128, timeoutMs: 20_000 },
    });
    const allocator = await runLeavingMemory(engine);
    markAllocated();
    const event = await survivor;
    const killed = killedAloneByMemory(deaths);
    expect({ allocator: shape(allocator), survivor: shape(event), killed }).toEqual({
      allocator: { type: 'result', payload: 40_000 },
      survivor: { type: 'result', payload: 'done' },
      killed: true,
    });
  } finally {
    await engine.dispose();
  }
}, 60_000);
