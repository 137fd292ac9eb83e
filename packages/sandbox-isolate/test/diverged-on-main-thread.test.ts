// A second run that diverges from its journal is aborted with the journal's error (CRASH,
// `details: { collateral: true, replayDiverged: true }`). When that second run started on its
// worker's main thread and keeps it in a synchronous loop, the worker cannot read the abort and is
// killed 250 ms later ('abort-unanswered'). Found here: the job then ended with the error of that
// kill ("The execution's worker process died", no details), a label chosen by the path that noticed
// the end rather than by what ended it. The abort's reason is what ended it, as it is when the
// worker reads the abort in time.
//
// Placement (3 workers): two holders take the main threads of two workers, so the victim and then
// the killer both go to the third, the victim first. Once the holders are done the killer kills
// that worker; the victim, first to run again alone, goes to the first free worker and starts on
// its main thread (another worker is free for other jobs).
import type { Logger, SandboxEvent, TerminalEvent } from '@coda/sandbox-core';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { SandboxEngine } from '../src/index.ts';
import { collect, expectError, expectResult } from './helpers.ts';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
async function until(done: () => boolean, withinMs = 15_000): Promise<void> {
  const deadline = Date.now() + withinMs;
  while (!done()) {
    if (Date.now() > deadline) throw new Error('condition not reached');
    await sleep(5);
  }
}

const deaths: { jobs: number; reason?: string }[] = [];
const logger: Logger = {
  debug: () => {},
  info: () => {},
  warn: (object: unknown, message?: string) => {
    if (message === 'sandbox worker process ended') {
      deaths.push(object as { jobs: number; reason?: string });
    }
  },
  error: () => {},
};
const armed: (() => void)[] = [];
const engine = new SandboxEngine({
  workers: 3,
  poolSize: 1,
  logger,
  tools: {
    arm: { handler: () => new Promise<null>((resolve) => armed.push(() => resolve(null))) },
  },
});
beforeAll(() => engine.ready(), 60_000);
afterAll(() => engine.dispose());

/** The journal's error, as docs/isolate.md ("Co-tenant survival") gives it. */
const expected = {
  code: 'CRASH',
  message:
    "The execution was lost with a worker process another execution killed, and ran again; the second run made a status event that differs from the first run's, so it was ended rather than show the caller or a handler something twice",
  details: { collateral: true, replayDiverged: true },
};

it('a diverged second run stuck on its main thread ends with replayDiverged, not a bare worker death', async () => {
  const hold = (ms: number) => ({
    code: `const end = Date.now() + ${ms}; while (Date.now() < end) {} return 'held'`,
  });
  const holders = [engine.run(hold(1_500)), engine.run(hold(1_500))];
  await sleep(200);
  const victim = engine.submit({
    code: "reportStatus('at ' + Date.now()); while (true) {}",
    limits: { timeoutMs: 10_000 },
  });
  const events: Promise<SandboxEvent[]> = collect(victim);
  let seen = false;
  void (async () => {
    for await (const event of victim) if (event.type === 'status') seen = true;
  })();
  const killer = engine.run({
    code: 'await tools.arm(); const m = new Map(); let i = 0; while (true) m.set(i++, { i });',
    limits: { memoryMb: 8 },
  });
  await until(() => armed.length === 1 && seen);
  for (const holder of holders) expect(expectResult(await holder).payload).toBe('held');
  armed[0]!();
  const all = await events;
  expect(all.map((event) => event.type)).toEqual(['status', 'error']);
  const error = expectError(all[1] as TerminalEvent, expected.code);
  expect({ code: error.code, message: error.message, details: error.details }).toEqual(expected);
  expectError(await killer, 'OOM');
  // The shared worker (two jobs) first; then the killer's second worker and the victim's second
  // worker (its abort unanswered: the second run did start on that worker's main thread). Those
  // two run at once on different workers, so their order is the scheduler's (a fresh-clone CI run
  // saw each order): compared as a set.
  const byOrder = deaths.map((death) => [death.jobs, death.reason]);
  expect(byOrder[0]).toEqual([2, 'out-of-memory']);
  expect(byOrder.slice(1).sort()).toEqual([
    [1, 'abort-unanswered'],
    [1, 'out-of-memory'],
  ]);
}, 30_000);
