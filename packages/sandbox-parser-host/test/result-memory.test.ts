// Host memory per result is bounded by its bytes: each shape that costs V8 the most per byte of
// JSON, returned through a real host (in a Node process of its own, measured with --expose-gc),
// is either held in at most 8 × (maxOutputBytes + 128 KiB) of heap, or refused before it is
// parsed with a VALIDATION failure that says why.
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

const memoryHost = fileURLToPath(new URL('./memory-host.ts', import.meta.url));
const maxOutputBytes = 2 * 1024 * 1024;
const budget = 8 * (maxOutputBytes + 128 * 1024);

// shape, JSON bytes asked for, whether the host takes it (from the measurements in
// docs/performance.md: ~21 heap bytes per byte for `{}`, 20 for `[[0]]`, 13 for `[]` and for
// objects with distinct keys, 9 for one object with distinct keys, 4 for numbers).
const table: [string, number, 'held' | 'refused'][] = [
  ['emptyObjects', 2_000_000, 'refused'],
  ['emptyArrays', 2_000_000, 'refused'],
  ['nestedPairs', 2_000_000, 'refused'],
  ['distinctKeys', 2_000_000, 'refused'],
  ['bigObjectDistinctKeys', 2_000_000, 'refused'],
  ['emptyObjects', 500_000, 'held'],
  ['distinctKeys', 500_000, 'held'],
  ['zeros', 2_000_000, 'held'],
  ['records', 2_000_000, 'held'],
  ['longKeysRepeated', 2_000_000, 'held'],
  ['shortStrings', 2_000_000, 'held'],
  ['oneLongString', 2_000_000, 'held'],
];

interface Row {
  name: string;
  ok: boolean;
  code?: string;
  error?: string;
  exitCode: number | null;
  growth: number;
}

async function measure(name: string, bytes: number): Promise<Row> {
  const { stdout } = await promisify(execFile)(
    process.execPath,
    [
      '--expose-gc',
      '--conditions=@coda/source',
      memoryHost,
      name,
      String(bytes),
      String(maxOutputBytes),
    ],
    { maxBuffer: 1024 * 1024, timeout: 120_000 },
  );
  return (JSON.parse(stdout) as Row[])[0] as Row;
}

describe('host memory per result', () => {
  it('every shape is held within 8 × (maxOutputBytes + 128 KiB), or refused unparsed', async () => {
    const rows: Row[] = [];
    // Two at a time: each process holds up to a few hundred MiB while it measures.
    for (let at = 0; at < table.length; at += 2) {
      rows.push(
        ...(await Promise.all(
          table.slice(at, at + 2).map(([name, bytes]) => measure(name, bytes)),
        )),
      );
    }
    rows.forEach((row, index) => {
      const [name, , expected] = table[index] as (typeof table)[number];
      expect(row.name).toBe(name);
      if (expected === 'held') {
        expect({ name, ok: row.ok }).toEqual({ name, ok: true });
        expect(row.growth).toBeLessThan(budget);
      } else {
        // Exit code 1: the runner refused it before sending (the host checks again on arrival:
        // src/host/response-reader.test.ts).
        expect({
          name,
          code: row.code,
          exitCode: row.exitCode,
          error: row.error?.split(': too many')[0],
        }).toEqual({
          name,
          code: 'VALIDATION',
          exitCode: 1,
          error: `parser result would take over ${budget} bytes of host memory once parsed (8 × (maxOutputBytes + 131072))`,
        });
        // Refused before it was built: nothing of it is held.
        expect(row.growth).toBeLessThan(maxOutputBytes);
      }
    });
  }, 180_000);
});
