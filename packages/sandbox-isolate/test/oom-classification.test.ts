// Heap exhaustion ends as OOM on every path that can notice it — synchronous code, code resumed
// after a data request, after a tool call, in a timer callback, and a data answer that cannot be
// copied in — in both modes; the answers are refused before they are copied, so their worker
// survives (its pid does not change). Real isolates, real workers.
import { afterAll, describe, expect, it } from 'vitest';
import { SandboxEngine } from '../src/index.ts';
import { expectError, expectHealthy, workerDeathLog } from './helpers.ts';

/** Fills the heap until it is exhausted. */
const bomb = "const a = []; for (;;) a.push('x'.repeat(1000) + Math.random());";

/** Each path, its code, and whether the worker must survive it (the heap bombs may kill it). */
const paths: { path: string; code: string; workerSurvives: boolean }[] = [
  { path: 'synchronous code', code: bomb, workerSurvives: false },
  {
    path: 'after a data request',
    code: `await dataProxy.request({}); ${bomb}`,
    workerSurvives: false,
  },
  { path: 'after a tool call', code: `await tools.lookup(); ${bomb}`, workerSurvives: false },
  {
    path: 'in a timer callback',
    code: `await new Promise(() => setTimeout(() => { ${bomb} }, 1));`,
    workerSurvives: false,
  },
  // Both answers fit maxDataBytes; copied in, they aborted the worker (SIGABRT, CRASH).
  {
    path: 'a data answer longer than the whole heap',
    code: 'const s = await dataProxy.request({ units: 40_000_000 }); return s.length',
    workerSurvives: true,
  },
  {
    path: 'a data answer bigger than the room left in the heap',
    code: `const keep = []; for (let i = 0; i < 18; i++) keep.push(new Array(131072).fill(i + 0.5));
      const s = await dataProxy.request({ units: 20_000_000 }); return [keep.length, s.length]`,
    workerSurvives: true,
  },
];

describe.each(['process', 'in-process'] as const)(
  'heap exhaustion is OOM on every path (%s)',
  (isolation) => {
    const { logger, deaths } = workerDeathLog();
    const engine = new SandboxEngine({
      isolation,
      workers: 1,
      logger,
      dataHandler: (params) => {
        const units = (params as { units?: number }).units;
        return units === undefined ? 1 : 'x'.repeat(units);
      },
      tools: { lookup: { handler: () => 1 } },
    });
    afterAll(() => engine.dispose());

    it.each(paths)('$path', async ({ code, workerSurvives }) => {
      await engine.ready();
      deaths.length = 0;
      const event = expectError(await engine.run({ code, limits: { memoryMb: 32 } }), 'OOM');
      expect(event.details).toMatchObject({ memoryMb: 32 });
      if (workerSurvives) expect(deaths).toEqual([]);
      await expectHealthy(engine);
    });
  },
);
