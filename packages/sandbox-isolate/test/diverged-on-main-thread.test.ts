// A second run that diverges from its journal is muted, not stopped: what it does next decides
// how it ends. Found here first (stop 34): stopped at once, a second run stuck on its worker's
// main thread in a synchronous loop could not read the stop and was killed 250 ms later
// ('abort-unanswered'), and ended with the error of that kill ("The execution's worker process
// died"), a label chosen by the path that noticed the end. Then (stop 38) the stop was found to
// race what the run did next (attack-35's hogs). Muted, the loop runs into the time limit it would
// have run into the first time: `TIMEOUT`, its own, after the caller saw the first run's status
// only, and no worker is killed for it.
//
// A second run starts where its first run started: on its worker's main thread or off it (second
// row). Placement of the first row (3 workers): the victim comes first, alone, and starts on a
// worker's main thread; before a time T it awaits a timer once, which frees that thread (a
// microtask would not: it runs in the same call). Two holders then
// take the main threads of the other two workers, so the killer joins the victim. Once the holders
// are done the killer kills that worker; the victim runs again alone, on a free worker's main
// thread, past T: it no longer awaits, and its loop holds that thread.
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
/** Handler starts of the second row's tools, in order. */
const starts: string[] = [];
/** The second row's `gate` calls, waiting for the test. */
const gates: (() => void)[] = [];
const engine = new SandboxEngine({
  workers: 3,
  poolSize: 1,
  logger,
  tools: {
    arm: { handler: () => new Promise<null>((resolve) => armed.push(() => resolve(null))) },
    pay: {
      handler: () => {
        starts.push('pay');
        return 'paid';
      },
    },
    gate: {
      handler: () => {
        starts.push('gate');
        return new Promise<string>((resolve) => gates.push(() => resolve('open')));
      },
    },
  },
});
beforeAll(() => engine.ready(), 60_000);
afterAll(() => engine.dispose());

it('a diverged second run stuck on its main thread ends with its own TIMEOUT, its status muted', async () => {
  const hold = (ms: number) => ({
    code: `const end = Date.now() + ${ms}; while (Date.now() < end) {} return 'held'`,
  });
  const victim = engine.submit({
    code: `if (Date.now() < ${Date.now() + 700}) await new Promise((resolve) => setTimeout(resolve, 10));
           reportStatus('at ' + Date.now()); while (true) {}`,
    limits: { timeoutMs: 4_000 },
  });
  const events: Promise<SandboxEvent[]> = collect(victim);
  let firstStatus: string | undefined;
  void (async () => {
    for await (const event of victim) if (event.type === 'status') firstStatus ??= event.message;
  })();
  await until(() => firstStatus !== undefined);
  const holders = [engine.run(hold(1_500)), engine.run(hold(1_500))];
  await sleep(200);
  const killer = engine.run({
    code: 'await tools.arm(); const m = new Map(); let i = 0; while (true) m.set(i++, { i });',
    limits: { memoryMb: 8 },
  });
  await until(() => armed.length === 1);
  for (const holder of holders) expect(expectResult(await holder).payload).toBe('held');
  const killedAt = performance.now();
  armed[0]!();
  const all = await events;
  // One status, the first run's (the second run's differs, and nobody sees it), then the time
  // limit of the second run, which got its full 4 s again.
  expect(all.map((event) => event.type)).toEqual(['status', 'error']);
  expect((all[0] as { message: string }).message).toBe(firstStatus);
  const error = expectError(all[1] as TerminalEvent, 'TIMEOUT');
  expect(error.details).toEqual({ timeoutMs: 4_000 });
  expect(performance.now() - killedAt).toBeGreaterThan(4_000);
  expectError(await killer, 'OOM');
  // The shared worker (two jobs), then the killer's second worker. The victim's second worker
  // was not killed: isolated-vm's own time limit interrupted the loop.
  expect(deaths.map((death) => [death.jobs, death.reason])).toEqual([
    [2, 'out-of-memory'],
    [1, 'out-of-memory'],
  ]);
}, 30_000);

// The same placement: the first run starts on its isolate's own thread, the second on its
// worker's main thread. There a status is a direct call while a tool call waits for the thread,
// so code that calls a tool and then reports a status crossed in the other order the second time,
// and a second run that did exactly what the first did ended replayDiverged.
it('a second run started on its main thread reproduces a first run started off it', async () => {
  const deathsBefore = deaths.length;
  const hold = (ms: number) => ({
    code: `const end = Date.now() + ${ms}; while (Date.now() < end) {} return 'held'`,
  });
  const holders = [engine.run(hold(1_500)), engine.run(hold(1_500))];
  await sleep(200);
  const victim = engine.submit({
    code: "const p = tools.pay(); reportStatus('after pay'); const r = await p; return [r, await tools.gate()];",
  });
  const events: Promise<SandboxEvent[]> = collect(victim);
  const killer = engine.run({
    code: 'await tools.arm(); const m = new Map(); let i = 0; while (true) m.set(i++, { i });',
    limits: { memoryMb: 8 },
  });
  await until(() => armed.length === 2 && gates.length === 1);
  for (const holder of holders) expect(expectResult(await holder).payload).toBe('held');
  armed[1]!();
  await until(() => deaths.length > deathsBefore);
  expect(deaths[deathsBefore]?.jobs).toBe(2);
  gates[0]!();
  const all = await events;
  expect(all.map((event) => (event.type === 'status' ? event.message : event.type))).toEqual([
    'after pay',
    'result',
  ]);
  expect(expectResult(all[1] as TerminalEvent).payload).toEqual(['paid', 'open']);
  expect(starts).toEqual(['pay', 'gate']);
  expectError(await killer, 'OOM');
}, 30_000);
