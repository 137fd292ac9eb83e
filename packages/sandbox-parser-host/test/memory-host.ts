// Run by result-memory.test.ts in its own Node process (with --expose-gc): returns each shaped
// result through a real host and prints, per shape, the outcome and how much the host's heap
// (plus external memory) grew while it holds the result.
import { fileURLToPath } from 'node:url';
import { createParserHost } from '../src/index.ts';

const [names, bytes, maxOutputBytes] = [
  (process.argv[2] ?? '').split(','),
  Number(process.argv[3]),
  Number(process.argv[4]),
];
const gc = (globalThis as { gc?: () => void }).gc;
if (gc === undefined) throw new Error('run with --expose-gc');
const used = (): number => {
  gc();
  gc();
  const usage = process.memoryUsage();
  return usage.heapUsed + usage.external;
};
const host = createParserHost({
  module: fileURLToPath(new URL('./fixtures/shapes.mjs', import.meta.url)),
  confinement: 'none',
  warmSpare: false,
  maxOutputBytes,
  limits: { memoryBytes: 1024 * 1024 * 1024, timeout: 60_000 },
});
const rows = [];
for (const name of names) {
  const before = used();
  const result = await host.runParser('shape', { name, bytes });
  const growth = used() - before;
  rows.push({
    name,
    ok: result.ok,
    code: result.code,
    error: result.error,
    exitCode: result.exitCode,
    growth,
  });
  // Held until measured, then let go.
  void result;
}
await host.close();
console.log(JSON.stringify(rows));
