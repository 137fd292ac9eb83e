// The cost of one `tools.NAME(input)` call next to one `dataProxy.request(params)` call, measured
// in the same run: executions that make 20 calls of one kind, interleaved round by round with
// executions that make none (the order rotating), so that the difference over 20 is the cost of a call. Tools with and
// without a zod input schema, in both isolation modes. Prints Markdown lines through `log`.
import { z } from 'zod';
import { SandboxEngine } from '../src/index.ts';

const callsPerExecution = 20;
const answer = { orders: [{ id: 1, total: 12.5 }], region: 'EMEA' };

const kinds = {
  none: 'return 0',
  'dataProxy.request': `for (let i = 0; i < ${callsPerExecution}; i++) await dataProxy.request({ region: 'EMEA', page: i }); return 0`,
  'tools.getOrders (zod schema)': `for (let i = 0; i < ${callsPerExecution}; i++) await tools.getOrders({ region: 'EMEA', page: i }); return 0`,
  'tools.rawOrders (no schema)': `for (let i = 0; i < ${callsPerExecution}; i++) await tools.rawOrders({ region: 'EMEA', page: i }); return 0`,
} as const;
type Kind = keyof typeof kinds;

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
      // A different kind goes first each round: what runs after a refill is not always the same.
      for (let index = 0; index < order.length; index++) {
        const [kind, code] = order[(index + round + 3) % order.length] as [Kind, string];
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
if (import.meta.main) await toolCallReport(60, (line) => console.log(line));
