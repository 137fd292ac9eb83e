// The cost of TypeScript input: Node's type stripper alone on a 10 KB snippet (and on one at the
// 512 KiB maxCodeBytes default), and a whole execution of that snippet as TypeScript next to the
// same program already stripped, run as JavaScript, interleaved in the same run. Prints Markdown
// lines; run alone with `node --no-node-snapshot --conditions=@coda/source bench/typescript-strip.ts`.
import { Bench } from 'tinybench';
import { SandboxEngine } from '../src/index.ts';
import { stripTypes } from '../src/isolate/typescript-input.ts';

// A typical model-written snippet: interfaces, annotations, generics, assertions, and a loop.
const unit = `interface Order { id: string; total: number; region?: 'EMEA' | 'APAC' }
function totalOf<T extends Order>(list: readonly T[], pick: (order: T) => number): number {
  let total: number = 0;
  for (const order of list) total += pick(order);
  return total;
}
const orders: Order[] = [{ id: 'a', total: 2 } as Order, { id: 'b', total: 3, region: 'EMEA' }];
`;

/** `bytes` or a little more of TypeScript that returns a number. */
function snippet(bytes: number): string {
  let code = '';
  for (let index = 0; code.length < bytes; index++) {
    code += unit.replaceAll('totalOf', `totalOf${index}`).replaceAll('orders', `orders${index}`);
  }
  return `${code}return totalOf0(orders0, (order) => order.total);`;
}

async function javaScriptOf(code: string): Promise<string> {
  const stripped = await stripTypes(code, { deadlineMs: 60_000 });
  if ('error' in stripped) throw new Error(stripped.error.message);
  if ('ended' in stripped) throw new Error(`strip ended: ${stripped.ended}`);
  return stripped.code;
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[values.length >> 1] ?? 0;

/** Markdown lines of the TypeScript strip figures, `rounds` interleaved execution rounds. */
export async function typeScriptStripReport(rounds: number, log: (line: string) => void) {
  const small = snippet(10 * 1024);
  const large = snippet(512 * 1024 - 64);
  await javaScriptOf(small); // the stripper's first call starts its thread and loads it
  const bench = new Bench({ time: 1_000 });
  bench.add('10 KB', async () => void (await javaScriptOf(small)));
  bench.add('512 KiB', async () => void (await javaScriptOf(large)));
  await bench.run();

  const engine = new SandboxEngine({ workers: 1 });
  const ts: number[] = [];
  const js: number[] = [];
  const stripped = await javaScriptOf(small);
  const timed = async (request: Parameters<SandboxEngine['run']>[0], into: number[]) => {
    const started = performance.now();
    const event = await engine.run(request);
    into.push(performance.now() - started);
    if (event.type !== 'result' || event.payload !== 5) throw new Error(JSON.stringify(event));
  };
  try {
    await engine.ready();
    for (let round = 0; round < rounds + 5; round++) {
      const warm = round < 5;
      await timed({ code: small, language: 'typescript' }, warm ? [] : ts);
      await timed({ code: stripped }, warm ? [] : js);
    }
  } finally {
    await engine.dispose();
  }

  log(`#### TypeScript input: Node's type stripper (strip mode), and a whole execution`);
  log('');
  log('| what | p50 | mean |');
  log('| --- | --- | --- |');
  for (const task of bench.tasks) {
    const result = task.result;
    if (result === undefined || !('latency' in result)) continue;
    const bytes = task.name === '10 KB' ? small.length : large.length;
    log(
      `| strip alone, ${task.name} (${bytes} chars) | ${(result.latency.p50 ?? 0).toFixed(3)} ms | ${result.latency.mean.toFixed(3)} ms |`,
    );
  }
  const tsMs = median(ts);
  const jsMs = median(js);
  log(
    `| execution of the 10 KB snippet as \`typescript\` (process mode, ${rounds} rounds) | ${tsMs.toFixed(3)} ms | |`,
  );
  log(
    `| the same program already stripped, as \`javascript\` (interleaved) | ${jsMs.toFixed(3)} ms | |`,
  );
  log(`| difference | ${(tsMs - jsMs).toFixed(3)} ms | |`);
  log('');
}

if (import.meta.url === `file://${process.argv[1]}`) {
  await typeScriptStripReport(Number(process.env.BENCH_ROUNDS ?? 100), (line) => console.log(line));
}
