// Errors a model can repair: every syntax and runtime error says where in the user's own code it
// happened (`details.location`, `details.sourceLine`), and its stack holds only user frames.
// Real isolates, in worker processes and in-process; JavaScript and TypeScript input; data
// requests and tool calls.
import { afterAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { SandboxEngine, type SandboxEngineConfig, type SubmitRequest } from '../src/index.ts';
import { expectError } from './helpers.ts';

interface Row {
  name: string;
  request: SubmitRequest;
  message: string;
  location: { line: number; column: number };
  sourceLine: string;
  /** The whole stack, exactly. */
  stack: string;
}

const rows: Row[] = [
  {
    name: 'a syntax error on line 1 (the code ends too early)',
    request: { code: 'return (' },
    message: 'SyntaxError: Unexpected end of input (line 1, column 9)',
    location: { line: 1, column: 9 },
    sourceLine: 'return (',
    stack: 'SyntaxError: Unexpected end of input\n    at <anonymous>:1:9',
  },
  {
    name: 'a syntax error on line 5',
    request: { code: 'let a = 1;\nlet b = 2;\n\nlet c = 3;\nlet d = ;\nreturn d' },
    message: "SyntaxError: Unexpected token ';' (line 5, column 9)",
    location: { line: 5, column: 9 },
    sourceLine: 'let d = ;',
    stack: "SyntaxError: Unexpected token ';'\n    at <anonymous>:5:9",
  },
  {
    name: 'a syntax error after CRLF line breaks',
    request: { code: 'let a = 1;\r\nlet b = ;' },
    message: "SyntaxError: Unexpected token ';' (line 2, column 9)",
    location: { line: 2, column: 9 },
    sourceLine: 'let b = ;',
    stack: "SyntaxError: Unexpected token ';'\n    at <anonymous>:2:9",
  },
  {
    name: 'a throw inside a nested function',
    request: {
      code: [
        'function outer() {',
        '  return inner();',
        '}',
        'function inner() {',
        '  throw new TypeError("bad " + 1);',
        '}',
        'return [1].map(() => outer());',
      ].join('\n'),
    },
    message: 'TypeError: bad 1',
    location: { line: 5, column: 9 },
    sourceLine: '  throw new TypeError("bad " + 1);',
    stack: [
      'TypeError: bad 1',
      '    at inner (<anonymous>:5:9)',
      '    at outer (<anonymous>:2:10)',
      '    at <anonymous>:7:22',
      '    at Array.map (<anonymous>)',
      '    at <anonymous>:7:12',
    ].join('\n'),
  },
  {
    name: 'a TypeError after an await',
    request: { code: 'await null;\nconst row = null;\nreturn row.total;' },
    message: "TypeError: Cannot read properties of null (reading 'total')",
    location: { line: 3, column: 12 },
    sourceLine: 'return row.total;',
    stack: "TypeError: Cannot read properties of null (reading 'total')\n    at <anonymous>:3:12",
  },
  {
    name: 'a rejected data request (the error is made in the bootstrap)',
    request: {
      code: 'const region = "EMEA";\nconst rows = await dataProxy.request({ fail: region });\nreturn rows;',
    },
    message: 'Error: no table for EMEA in <host>',
    location: { line: 2, column: 14 },
    sourceLine: 'const rows = await dataProxy.request({ fail: region });',
    stack: 'Error: no table for EMEA in <host>\n    at async <anonymous>:2:14',
  },
  {
    name: 'a rejected tool call (its handler threw)',
    request: {
      code: 'const orders = await tools.getOrders({ region: "APAC" });\nreturn orders;',
    },
    message: 'Error: no orders for APAC in <host>',
    location: { line: 1, column: 16 },
    sourceLine: 'const orders = await tools.getOrders({ region: "APAC" });',
    stack: 'Error: no orders for APAC in <host>\n    at async <anonymous>:1:16',
  },
  {
    name: 'TypeScript: a runtime error at the line of the TypeScript',
    request: {
      language: 'typescript',
      code: [
        'interface Order { total: number }',
        'const orders: Order[] = [];',
        'const first = orders[0] as Order;',
        'return first.total;',
      ].join('\n'),
    },
    message: "TypeError: Cannot read properties of undefined (reading 'total')",
    location: { line: 4, column: 14 },
    sourceLine: 'return first.total;',
    stack:
      "TypeError: Cannot read properties of undefined (reading 'total')\n    at <anonymous>:4:14",
  },
  {
    name: 'TypeScript: a syntax error the stripper finds',
    request: { language: 'typescript', code: 'const a: number = 1;\nconst b: = a;\nreturn b;' },
    message:
      'SyntaxError: Unexpected token `=`. Expected an identifier, void, yield, null, await, break, a string literal, a numeric literal, true, false, `, -, import, this, typeof, {, [, ( (line 2, column 10)',
    location: { line: 2, column: 10 },
    sourceLine: 'const b: = a;',
    stack:
      'SyntaxError: Unexpected token `=`. Expected an identifier, void, yield, null, await, break, a string literal, a numeric literal, true, false, `, -, import, this, typeof, {, [, (\n    at <anonymous>:2:10',
  },
];

const modes: NonNullable<SandboxEngineConfig['isolation']>[] = ['process', 'in-process'];

describe.each(modes)('in %s mode', (isolation) => {
  const engine = new SandboxEngine({
    isolation,
    workers: 1,
    dataHandler: (params) => {
      const fail = (params as { fail?: string }).fail;
      if (fail !== undefined) throw new Error(`no table for ${fail} in /srv/app/tables.ts`);
      return null;
    },
    tools: {
      getOrders: {
        description: 'Orders of one region.',
        input: z.object({ region: z.enum(['EMEA', 'APAC']) }),
        handler: ({ region }: { region: string }) => {
          throw new Error(`no orders for ${region} in /srv/app/orders.ts`);
        },
      },
    },
  });
  afterAll(() => engine.dispose());

  it.each(rows)('locates $name', async (row) => {
    const event = expectError(await engine.run(row.request), 'RUNTIME');
    expect(event.message).toBe(row.message);
    expect(event.details?.location).toEqual(row.location);
    expect(event.details?.sourceLine).toBe(row.sourceLine);
    expect(event.details?.stack).toBe(row.stack);
  });

  it('drops a location user code forged outside its own lines (its stack is its own text)', async () => {
    const code = [
      "const error = new Error('forged');",
      "error.stack = 'Error: forged\\n    at eval (eval at run (sandbox:bootstrap:1:1), <anonymous>:999:1)';",
      'throw error;',
    ].join('\n');
    const event = expectError(await engine.run({ code }), 'RUNTIME');
    expect(event.details).toEqual({
      name: 'Error',
      stack: 'Error: forged\n    at <anonymous>:997:1',
    });
  });
});
