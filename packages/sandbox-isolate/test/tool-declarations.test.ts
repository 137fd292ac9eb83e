// engine.toolDeclarations(): the declarations are checked the way a prompt's reader would use
// them — snippets of user code type-checked against them by the TypeScript compiler.
import ts from 'typescript';
import { afterAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { SandboxEngine } from '../src/index.ts';

type TreeNode = { name: string; children: TreeNode[] };
const TreeNodeSchema: z.ZodType<TreeNode> = z.lazy(() =>
  z.object({ name: z.string(), children: z.array(TreeNodeSchema) }),
);

const engine = new SandboxEngine({
  isolation: 'in-process',
  poolSize: 0,
  tools: {
    getOrders: {
      description: 'Orders of one region, newest first.',
      input: z
        .object({
          region: z.enum(['EMEA', 'APAC']).describe('Sales region'),
          limit: z.number().int().default(10),
          since: z.iso.datetime().optional(),
          tags: z.array(z.union([z.string(), z.number()])).optional(),
          'odd-key': z.literal(3).nullable().optional(),
        })
        .describe('Which orders'),
      handler: () => [],
    },
    saveTree: { input: TreeNodeSchema, handler: () => true },
    listRegions: { input: z.object({ page: z.number() }).optional(), handler: () => [] },
    free: { handler: (input) => input },
  },
});
afterAll(() => engine.dispose());

const declarations = engine.toolDeclarations();

/** The compiler's messages for `snippet`, run as the body of an async function. */
function typeErrors(snippet: string): string[] {
  const files = new Map([
    ['/virtual/tools.d.ts', declarations],
    ['/virtual/snippet.ts', `export async function main() {\n${snippet}\n}\n`],
  ]);
  const options: ts.CompilerOptions = {
    strict: true,
    noEmit: true,
    target: ts.ScriptTarget.ES2022,
    lib: ['lib.es2022.d.ts'],
    types: [],
    exactOptionalPropertyTypes: true,
  };
  const host = ts.createCompilerHost(options);
  const getSourceFile = host.getSourceFile.bind(host);
  host.getSourceFile = (name, version) => {
    const text = files.get(name);
    return text === undefined
      ? getSourceFile(name, version)
      : ts.createSourceFile(name, text, version);
  };
  host.fileExists = (
    (exists) => (name: string) =>
      files.has(name) || exists(name)
  )(host.fileExists.bind(host));
  const program = ts.createProgram([...files.keys()], options, host);
  return ts
    .getPreEmitDiagnostics(program)
    .map(
      (diagnostic) =>
        `${diagnostic.file?.fileName.replace('/virtual/', '') ?? ''}: ${ts.flattenDiagnosticMessageText(diagnostic.messageText, ' ')}`,
    );
}

describe('engine.toolDeclarations()', () => {
  it('renders each tool from its schema, with descriptions and defaults as doc comments', () => {
    expect(declarations).toBe(
      [
        'type SaveTreeInput = {',
        '  name: string;',
        '  children: SaveTreeInput[];',
        '};',
        'declare const tools: {',
        '  /**',
        '   * Orders of one region, newest first.',
        '   * @param input Which orders',
        '   */',
        '  getOrders(input: {',
        '    /** Sales region */',
        '    region: "EMEA" | "APAC";',
        '    /** @default 10 */',
        '    limit?: number;',
        '    /** @format date-time */',
        '    since?: string;',
        '    tags?: (string | number)[];',
        '    "odd-key"?: 3 | null;',
        '  }): Promise<unknown>;',
        '  saveTree(input: {',
        '    name: string;',
        '    children: SaveTreeInput[];',
        '  }): Promise<unknown>;',
        '  listRegions(input?: {',
        '    page: number;',
        '  }): Promise<unknown>;',
        '  free(input?: unknown): Promise<unknown>;',
        '};',
      ].join('\n'),
    );
  });

  it('type-checks correct calls', () => {
    expect(
      typeErrors(`
        const orders = await tools.getOrders({ region: 'EMEA' });
        await tools.getOrders({ region: 'APAC', limit: 5, since: '2026-01-01T00:00:00Z', tags: ['a', 1], 'odd-key': null });
        await tools.saveTree({ name: 'root', children: [{ name: 'leaf', children: [] }] });
        await tools.listRegions();
        await tools.listRegions({ page: 2 });
        await tools.free({ anything: [1] });
        return orders;`),
    ).toEqual([]);
  });

  it.each([
    [
      `await tools.getOrders({ region: 'MARS' })`,
      `snippet.ts: Type '"MARS"' is not assignable to type '"EMEA" | "APAC"'.`,
    ],
    [
      `await tools.getOrders({ region: 'EMEA', limit: '5' })`,
      `snippet.ts: Type 'string' is not assignable to type 'number'.`,
    ],
    [
      `await tools.getOrders({ region: 'EMEA', regoin: 'x' })`,
      `snippet.ts: Object literal may only specify known properties, but 'regoin' does not exist in type '{ region: "EMEA" | "APAC"; limit?: number; since?: string; tags?: (string | number)[]; "odd-key"?: 3 | null; }'. Did you mean to write 'region'?`,
    ],
    [`await tools.getOrders()`, 'snippet.ts: Expected 1 arguments, but got 0.'],
    [
      `await tools.saveTree({ name: 'root', children: [{ name: 1, children: [] }] })`,
      `snippet.ts: Type 'number' is not assignable to type 'string'.`,
    ],
    [
      `await tools.deleteAll()`,
      `snippet.ts: Property 'deleteAll' does not exist on type '{ getOrders(input: { region: "EMEA" | "APAC"; limit?: number; since?: string; tags?: (string | number)[]; "odd-key"?: 3 | null; }): Promise<unknown>; saveTree(input: { name: string; children: SaveTreeInput[]; }): Promise<...>; listRegions(input?: { ...; } | undefined): Promise<...>; free(input?: unknown): Promise<.....'.`,
    ],
  ])('refuses %s', (snippet, message) => {
    expect(typeErrors(snippet)).toEqual([message]);
  });

  it('declares an empty tools object for an engine without tools', async () => {
    const bare = new SandboxEngine({ isolation: 'in-process', poolSize: 0 });
    expect(bare.toolDeclarations()).toBe('declare const tools: {};');
    await bare.dispose();
  });
});
