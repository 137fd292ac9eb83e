// review-iso: an execution that ALONE crosses its worker's memory bound, after once sharing the
// worker with a short co-tenant that has since finished. Its own doing (docs/isolate.md, OOM row:
// "the worker crossed its resident-memory bound"; "Retries are bounded ... it ends with its own
// error (OOM)"). Since 8771fd8 it is "lost like a co-tenant" and run again alone: deterministic
// code then ends OOM, but code whose output depends on time (console.log(Math.random())) diverges
// on the second run and ends CRASH { collateral: true, replayDiverged: true }, a message saying
// "another execution killed" the worker, although it was alone and the cause.
import type { TerminalEvent } from '@coda/sandbox-core';
import { afterAll, expect, it } from 'vitest';
import { SandboxEngine } from '../src/index.ts';
import { workerDeathLog } from './helpers.ts';

const { logger, deaths } = workerDeathLog();
const engine = new SandboxEngine({ workers: 1, logger });
afterAll(() => engine.dispose());

const hog = (prefix: string) => `${prefix}
  await new Promise((resolve) => setTimeout(resolve, 1_000));
  Array(1e9).fill(0);
  return 'filled'`;

/** Independent expectation: the hog is alone when it crosses the bound, so OOM; the co-tenant finishes. */
const expected = {
  deterministic: {
    hog: { type: 'error', code: 'OOM', collateral: undefined },
    cotenant: { type: 'result', payload: 'c' },
  },
  random: {
    hog: { type: 'error', code: 'OOM', collateral: undefined },
    cotenant: { type: 'result', payload: 'c' },
  },
};

const shape = (event: TerminalEvent) =>
  event.type === 'result'
    ? { type: event.type, payload: event.payload }
    : {
        type: event.type,
        code: event.code,
        collateral: (event.details as { collateral?: boolean } | undefined)?.collateral,
      };

async function scenario(prefix: string) {
  const hogRun = engine.run({ code: hog(prefix), limits: { memoryMb: 32, timeoutMs: 20_000 } });
  // Shares the worker for 200 ms, then leaves; the hog crosses the bound alone 800 ms later.
  const cotenant = await engine.run({
    code: "await new Promise((resolve) => setTimeout(resolve, 200)); return 'c'",
    limits: { memoryMb: 32, timeoutMs: 20_000 },
  });
  const hogEvent = await hogRun;
  return { hog: shape(hogEvent), cotenant: shape(cotenant) };
}

it('a hog alone at the memory bound after once sharing ends OOM (deterministic and not)', async () => {
  await engine.ready();
  const deterministic = await scenario("console.log('start');");
  const random = await scenario('console.log(String(Math.random()));');
  expect({ deterministic, random }).toEqual(expected);
  // The scenario is real: the worker was killed by its memory bound, holding one execution.
  const reasons = deaths.map((death) => death as { reason?: string; jobs: number });
  expect(reasons.some((death) => death.reason === 'memory' && death.jobs === 1)).toBe(true);
  expect(reasons.every((death) => death.jobs <= 1)).toBe(true);
}, 90_000);
