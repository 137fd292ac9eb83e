// The hostile table, in a module that imports nothing: the benchmark and
// test/host-responsiveness.test.ts both run it (a test file cannot be imported by the benchmark:
// it calls vitest's `describe` at load time).

/** One hostile snippet and the outcome the engine must give it: `result`, or an error code. */
export interface HostileSnippet {
  readonly name: string;
  readonly code: string;
  readonly expected: string;
}

/** The hostile table: each snippet tries to make the host parse, hold or wait on something big. */
export const hostileSnippets: readonly HostileSnippet[] = [
  {
    name: '48 MB of data-request params (under maxDataBytes)',
    code: 'await dataProxy.request(new Array(16e6).fill({})); return 1',
    expected: 'LIMIT_EXCEEDED',
  },
  {
    name: 'a 100 MB result',
    code: "return 'x'.repeat(100 * 1024 * 1024)",
    expected: 'VALIDATION',
  },
  {
    name: 'a forged 100 MB outcome through Promise.prototype.then',
    code: `const real = Promise.prototype.then; const forged = 'ok\\n0\\n"' + 'x'.repeat(100 * 1024 * 1024) + '"';
      Promise.prototype.then = function (ok, fail) { return real.call(this, () => ok(forged), fail); };
      return 'x'.repeat(6 * 1024 * 1024)`,
    expected: 'VALIDATION',
  },
  {
    name: 'a result 100 000 levels deep',
    code: "let v = 'x'; for (let i = 0; i < 100000; i++) v = [v]; return v",
    expected: 'VALIDATION',
  },
  {
    name: 'a 20 MB typed array',
    code: 'return new Uint8Array(20e6)',
    expected: 'VALIDATION',
  },
  {
    name: 'a million console lines',
    code: "for (let i = 0; i < 1e6; i++) console.log('line', i); return 1",
    expected: 'result',
  },
  {
    name: 'status data at the byte cap, over and over',
    code: "const big = 'y'.repeat(1_000_000); for (let i = 0; i < 2000; i++) reportStatus('s', { big }); return 1",
    expected: 'result',
  },
  {
    name: 'ten data requests of 1 MB each (the per-request maximum)',
    code: "const p = 'z'.repeat(1_000_000); for (let i = 0; i < 10; i++) await dataProxy.request(p); return 1",
    expected: 'result',
  },
];

/** Benign snippets run the same way, for the figures to compare against. */
export const benignSnippets: readonly HostileSnippet[] = [
  { name: 'return 1', code: 'return 1', expected: 'result' },
  {
    name: 'small JSON work',
    code: `const rows = Array.from({ length: 200 }, (_, i) => ({ id: i, name: 'row ' + i, tags: ['a', 'b'], score: i * 1.5 }));
      const back = JSON.parse(JSON.stringify(rows));
      return { count: back.length, total: back.reduce((sum, row) => sum + row.score, 0), first: back[0] }`,
    expected: 'result',
  },
];
