// The cost of one `tools.NAME(input)` call next to one `dataProxy.request(params)` call, measured
// in the same run: executions that make 50 calls of one kind, interleaved round by round with
// executions that make none (in a shuffled order, each after a pause), so that the difference
// over 50 is the cost of a call. Tools with and without a zod input schema, in both isolation
// modes. Prints Markdown lines through `log`.
import { z } from 'zod';
import { SandboxEngine } from '../src/index.ts';

const callsPerExecution = 50;
const answer = { orders: [{ id: 1, total: 12.5 }], region: 'EMEA' };

const kinds = {
  none: 'return 0',
  'dataProxy.request': `for (let i = 0; i < ${callsPerExecution}; i++) await dataProxy.request({ region: 'EMEA', page: i }); return 0`,
  'tools.getOrders (zod schema)': `for (let i = 0; i < ${callsPerExecution}; i++) await tools.getOrders({ region: 'EMEA', page: i }); return 0`,
  'tools.rawOrders (no schema)': `for (let i = 0; i < ${callsPerExecution}; i++) await tools.rawOrders({ region: 'EMEA', page: i }); return 0`,
} as const;
type Kind = keyof typeof kinds;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Shuffles `items` in place, the same way for the same `seed` (a small LCG, no Math.random). */
function shuffle<T>(items: T[], seed: number): void {
  let state = seed * 2_654_435_761 + 1;
  for (let index = items.length - 1; index > 0; index--) {
    state = (state * 1_103_515_245 + 12_345) % 2_147_483_648;
    const other = state % (index + 1);
    [items[index], items[other]] = [items[other] as T, items[index] as T];
  }
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? 0;
}

async function timed(engine: SandboxEngine, code: string): Promise<number> {
  const started = performance.now();
  const event = await engine.run({ code });
  const ms = performance.now() - started;
  if (event.type !== 'result') throw new Error(`${event.code}: ${event.message}`);
  return ms;
}

/** Markdown lines of the tool-call comparison, `rounds` interleaved rounds per mode. */
export async function toolCallReport(rounds: number, log: (line: string) => void): Promise<void> {
  log(
    `#### Tool call vs dataProxy.request, per call (${callsPerExecution} calls an execution, ${rounds} interleaved rounds, p50 of the execution minus p50 of one with no call)`,
  );
  log('');
  log('| mode | dataProxy.request | tools (zod schema) | ratio | tools (no schema) | ratio |');
  log('| --- | --- | --- | --- | --- | --- |');
  for (const isolation of ['process', 'in-process'] as const) {
    const engine = new SandboxEngine({
      isolation,
      limits: { maxDataRequests: callsPerExecution },
      dataHandler: () => answer,
      tools: {
        getOrders: {
          description: 'Orders of one region.',
          input: z.object({ region: z.enum(['EMEA', 'APAC']), page: z.number().int() }),
          handler: () => answer,
        },
        rawOrders: { handler: () => answer },
      },
    });
    await engine.ready();
    const samples = new Map<Kind, number[]>(Object.keys(kinds).map((kind) => [kind as Kind, []]));
    const order = Object.entries(kinds) as [Kind, string][];
    for (let round = -3; round < rounds; round++) {
      // A different order each round, and a pause before each execution: the pool refills after
      // every execution, and a kind that always followed the shortest one would always share
      // the cores with that refill.
      shuffle(order, round + 3);
      for (const [kind, code] of order) {
        await sleep(10);
        const ms = await timed(engine, code);
        if (round >= 0) samples.get(kind)?.push(ms);
      }
    }
    await engine.dispose();
    const base = median(samples.get('none') ?? []);
    const perCall = (kind: Kind) => (median(samples.get(kind) ?? []) - base) / callsPerExecution;
    const data = perCall('dataProxy.request');
    const schema = perCall('tools.getOrders (zod schema)');
    const raw = perCall('tools.rawOrders (no schema)');
    const ms = (value: number) => `${(value * 1_000).toFixed(1)} µs`;
    log(
      `| ${isolation} | ${ms(data)} | ${ms(schema)} | ${(schema / data).toFixed(2)}× | ${ms(raw)} | ${(raw / data).toFixed(2)}× |`,
    );
  }
  log('');
}

// Alone: `node --no-node-snapshot --conditions=@coda/source bench/tool-call.ts` (pnpm bench runs
// it among the rest).
if (import.meta.main) await toolCallReport(100, (line) => console.log(line));
