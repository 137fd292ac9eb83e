// TypeScript input: stripped of its types with Node's own stripper, run as JavaScript, errors at
// the TypeScript's own lines. Real isolates in worker processes.
import { afterAll, describe, expect, it } from 'vitest';
import { SandboxEngine } from '../src/index.ts';
import { expectError, expectResult } from './helpers.ts';

const engine = new SandboxEngine({ workers: 1, dataHandler: () => [{ total: 2 }, { total: 3 }] });
const typeScriptEngine = new SandboxEngine({ workers: 1, language: 'typescript' });
afterAll(() => Promise.all([engine.dispose(), typeScriptEngine.dispose()]));

const orders = [
  'interface Order { total: number; region?: string }',
  'const rows = (await dataProxy.request({ table: "orders" })) as Order[];',
  'const sum = <T,>(list: readonly T[], pick: (item: T) => number): number =>',
  '  list.reduce((total: number, item: T) => total + pick(item), 0);',
  'return sum<Order>(rows, (order) => order.total);',
].join('\n');

describe("submit({ language: 'typescript' })", () => {
  it('runs TypeScript: interfaces, generics, annotations and assertions are removed', async () => {
    const event = await engine.run({ code: orders, language: 'typescript' });
    expect(expectResult(event).payload).toBe(5);
  });

  it('does not check types', async () => {
    const code = "const n: number = 'not a number' as unknown as number;\nreturn n;";
    expect(expectResult(await engine.run({ code, language: 'typescript' })).payload).toBe(
      'not a number',
    );
  });

  it('is not TypeScript by default: the same code is a JavaScript syntax error', async () => {
    const event = expectError(await engine.run({ code: orders }), 'RUNTIME');
    expect(event.details?.name).toBe('SyntaxError');
    expect(event.details?.location).toEqual({ line: 1, column: 11 });
  });

  it('takes the engine default, which a request overrides', async () => {
    const typed = 'const a: number = 2;\nreturn a * 3;';
    expect(expectResult(await typeScriptEngine.run({ code: typed })).payload).toBe(6);
    const plain = expectError(
      await typeScriptEngine.run({ code: typed, language: 'javascript' }),
      'RUNTIME',
    );
    expect(plain.details?.name).toBe('SyntaxError');
  });

  it('counts maxCodeBytes on the code as given', async () => {
    const code = `const label: string = 'é';\nreturn label;`;
    const size = Buffer.byteLength(code);
    const event = expectError(
      await engine.run({ code, language: 'typescript', limits: { maxCodeBytes: size - 1 } }),
      'VALIDATION',
    );
    expect(event.details).toMatchObject({ field: 'maxCodeBytes', limit: size - 1, size });
    const fits = await engine.run({ code, language: 'typescript', limits: { maxCodeBytes: size } });
    expect(expectResult(fits).payload).toBe('é');
  });

  it('refuses an unknown language, naming the field and the value', async () => {
    const event = expectError(
      await engine.run({ code: 'return 1', language: 'python' as 'typescript' }),
      'VALIDATION',
    );
    expect(event.message).toMatch(/language/);
    expect(event.message).toMatch(/python/);
  });

  it('refuses an unknown engine default language in the constructor', () => {
    expect(() => new SandboxEngine({ language: 'ts' as 'typescript' })).toThrow(/language/);
  });
});

describe('TypeScript errors a model can repair', () => {
  const cases: [string, string, string, { line: number; column: number }, string][] = [
    [
      'a type syntax error (from the stripper)',
      'const a: number = 1;\nconst b: = 2;\nreturn a + b;',
      'SyntaxError: Unexpected token `=`. Expected an identifier, void, yield, null, await, break, a string literal, a numeric literal, true, false, `, -, import, this, typeof, {, [, ( (line 2, column 10)',
      { line: 2, column: 10 },
      'const b: = 2;',
    ],
    [
      'an enum, which needs more than removing types',
      'const a = 1;\nenum Region { EMEA, APAC }\nreturn Region.EMEA;',
      'SyntaxError: TypeScript enum is not supported in strip-only mode (line 2, column 1)',
      { line: 2, column: 1 },
      'enum Region { EMEA, APAC }',
    ],
    [
      'code that ends too early',
      'const a: number = 1;\nreturn (',
      'SyntaxError: Expression expected (line 2, column 9)',
      { line: 2, column: 9 },
      'return (',
    ],
    [
      'a tab before the error',
      'const a = 1;\n\tconst b: = 2;',
      'SyntaxError: Unexpected token `=`. Expected an identifier, void, yield, null, await, break, a string literal, a numeric literal, true, false, `, -, import, this, typeof, {, [, ( (line 2, column 11)',
      { line: 2, column: 11 },
      '\tconst b: = 2;',
    ],
  ];

  it.each(cases)('locates %s', async (_name, code, message, location, sourceLine) => {
    const event = expectError(await engine.run({ code, language: 'typescript' }), 'RUNTIME');
    expect(event.message).toBe(message);
    expect(event.details?.name).toBe('SyntaxError');
    expect(event.details?.location).toEqual(location);
    expect(event.details?.sourceLine).toBe(sourceLine);
  });

  it('gives a runtime error the line and column of the TypeScript, and its line', async () => {
    const code = [
      'interface Row { total: number }',
      'function first(rows: Row[]): Row {',
      '  return rows[0] as Row;',
      '}',
      'const row: Row = first([]);',
      'return row.total.toFixed(2);',
    ].join('\n');
    const event = expectError(await engine.run({ code, language: 'typescript' }), 'RUNTIME');
    expect(event.message).toBe("TypeError: Cannot read properties of undefined (reading 'total')");
    expect(event.details?.location).toEqual({ line: 6, column: 12 });
    expect(event.details?.sourceLine).toBe('return row.total.toFixed(2);');
    expect(event.details?.stack).toBe(
      "TypeError: Cannot read properties of undefined (reading 'total')\n    at <anonymous>:6:12",
    );
  });
});
