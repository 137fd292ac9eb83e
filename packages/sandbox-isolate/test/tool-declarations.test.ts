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
function typeErrors(snippet: string, declared = declarations): string[] {
  const files = new Map([
    ['/virtual/tools.d.ts', declared],
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

describe('declarations for any set of tool names, and output schemas', () => {
  type Node = { id: string; next?: Node | undefined };
  const node: z.ZodType<Node> = z.lazy(() => z.object({ id: z.string(), next: node.optional() }));
  const tricky = new SandboxEngine({
    isolation: 'in-process',
    poolSize: 0,
    tools: {
      // `foo` and `Foo` with recursive schemas both declared `type FooInput` (issue 23).
      foo: { input: node, output: node, handler: (input) => input },
      Foo: { input: node, output: node, handler: (input) => input },
      fooInput: { input: node, handler: () => null },
      FooInput: { input: node, handler: () => null },
      Promise: { input: node, output: z.array(node), handler: () => [] },
      $: { input: node, handler: () => null },
      _: { input: node, handler: () => null },
      constructor: { input: node, handler: () => null },
      total: {
        input: z.object({ n: z.number() }),
        output: z.object({ sum: z.number(), doubled: z.number().transform((n) => n * 2) }),
        handler: (input) => {
          const { n } = input as { n: number };
          return n < 0 ? { sum: 'negative' } : { sum: n, doubled: n };
        },
      },
    },
  });
  afterAll(() => tricky.dispose());
  const text = tricky.toolDeclarations();

  it('compiles with colliding and tricky names, each alias declared once', () => {
    const aliases = [...text.matchAll(/^type (\w+) =/gm)].map((match) => match[1]);
    expect(new Set(aliases).size).toBe(aliases.length);
    expect(aliases).not.toContain('Promise');
    expect(
      typeErrors(
        `const a: { id: string } = await tools.foo({ id: 'a', next: { id: 'b' } });
         const b: { id: string } = await tools.Foo({ id: 'a' });
         const c: { id: string }[] = await tools.Promise({ id: 'x' });
         await tools.fooInput({ id: 'x' }); await tools.FooInput({ id: 'y' });
         await tools.$({ id: 'x' }); await tools._({ id: 'x' }); await tools.constructor({ id: 'x' });
         return [a, b, c];`,
        text,
      ),
    ).toEqual([]);
  });

  it('renders an output schema as the return type, which the compiler holds user code to', () => {
    // A transform's output has no JSON Schema: `unknown`, never narrower than the value.
    expect(text).toContain(
      '  total(input: {\n    n: number;\n  }): Promise<{\n    sum: number;\n    doubled: unknown;\n  }>;',
    );
    expect(
      typeErrors('const r = await tools.total({ n: 1 }); return r.sum.toFixed(1);', text),
    ).toEqual([]);
    expect(typeErrors('const r = await tools.total({ n: 1 }); return r.nope;', text)).toEqual([
      "snippet.ts: Property 'nope' does not exist on type '{ sum: number; doubled: unknown; }'.",
    ]);
  });

  it('checks the answer against the output schema on the host: user code sees its parsed value or a refusal', async () => {
    const event = await tricky.run({
      code: `const ok = await tools.total({ n: 3 });
        let refused; try { await tools.total({ n: -1 }); } catch (error) { refused = error.message; }
        return [ok, refused];`,
    });
    expect(event.type === 'result' && event.payload).toEqual([
      { sum: 3, doubled: 6 },
      "tools.total: the tool's answer does not match its output schema",
    ]);
  });
});
