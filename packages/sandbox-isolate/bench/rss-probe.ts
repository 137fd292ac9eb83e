// Child process of the benchmark: host RSS after 100 executions and after `count`, measured in a
// process that does nothing else (the parent's raw isolates would blur the figure).
import { getHeapSpaceStatistics } from 'node:v8';
import { SandboxEngine } from '../src/index.ts';

const count = Number(process.argv[2] ?? 10_000);
const engine = new SandboxEngine({ maxConcurrent: 16 });
await engine.ready();

async function runMany(total: number): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: 8 }, async () => {
      while (next < total) {
        next++;
        const event = await engine.run({ code: 'return 1 + 2' });
        if (event.type !== 'result') throw new Error(`${event.code}: ${event.message}`);
      }
    }),
  );
}

async function measure() {
  global.gc?.();
  await new Promise((resolve) => setTimeout(resolve, 200));
  const usage = process.memoryUsage();
  const newSpace = getHeapSpaceStatistics().find((space) => space.space_name === 'new_space');
  return {
    rssMb: usage.rss / 1_048_576,
    heapUsedMb: usage.heapUsed / 1_048_576,
    newSpaceMb: (newSpace?.space_size ?? 0) / 1_048_576,
  };
}

await runMany(100);
const after100 = await measure();
await runMany(count - 100);
const afterAll = await measure();
await engine.dispose();
console.log(JSON.stringify({ count, after100, afterAll }));
