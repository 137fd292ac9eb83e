// The worker memory bound (workerBaseMemoryMb + 3 × memoryMb of each execution it holds) kills a
// worker whose resident memory passes it; an execution alone in the worker then ends with its own
// OOM. Found here: what a co-tenant that had just finished left resident (its buffers, which the
// process does not hand back at once) counted against the one still running, which then ended
// OOM ("The worker process used 433 MiB, over its bound of 304 MiB") for memory it never used: a
// 16 MiB execution that only slept. Alone at the kill is not alone since it started: it runs
// again alone, and ends as its code does.
import type { TerminalEvent } from '@coda/sandbox-core';
import { afterAll, expect, it } from 'vitest';
import { SandboxEngine } from '../src/index.ts';
import { runLeavingMemory, workerDeathLog } from './helpers.ts';

const { logger, deaths } = workerDeathLog();
const engine = new SandboxEngine({ workers: 1, logger });
afterAll(() => engine.dispose());

/** What each execution's own code makes of it. */
const expected = {
  sleeper: { type: 'result', payload: 'slept' },
  allocator: { type: 'result', payload: 40_000 },
};

const shape = (event: TerminalEvent) =>
  event.type === 'result'
    ? { type: event.type, payload: event.payload }
    : { type: event.type, code: event.code, message: event.message };

it('an execution that used nothing is not OOM for what a finished co-tenant left resident', async () => {
  await engine.ready();
  const sleeper = engine.run({
    code: "await new Promise((resolve) => setTimeout(resolve, 3_000)); return 'slept'",
    limits: { memoryMb: 16, timeoutMs: 20_000 },
  });
  const allocator = await runLeavingMemory(engine);
  expect({ sleeper: shape(await sleeper), allocator: shape(allocator) }).toEqual(expected);
  // Whether the worker was replaced (memory bound) or not, nothing else ended.
  expect(deaths.every((death) => (death as { jobs: number }).jobs <= 1)).toBe(true);
}, 60_000);
