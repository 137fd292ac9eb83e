// engine.toolDeclarations(): the TypeScript declaration of the `tools` object user code sees,
// generated from each tool's zod schema (through zod's own JSON Schema output) with the
// descriptions as doc comments, to put in a model's prompt.
import { z } from 'zod';
import { docComment, type JsonSchema, renderType } from './json-schema-to-typescript.ts';
import type { ToolDefinition, ToolTable } from './tool-config.ts';

/**
 * Type names TypeScript or these declarations already use: a generated alias never takes one
 * (a tool `promise` with a definition `''` would otherwise declare `type Promise`).
 */
const reservedNames = ['Promise', 'Record', 'Array', 'Readonly', 'Partial', 'Required', 'Pick'];

/** The declarations of `tools`, one method per tool, plus the types recursive schemas refer to. */
export function renderToolDeclarations(tools: ToolTable): string {
  const aliases: string[] = [];
  const members: string[] = [];
  // One set of names for every tool, so no two aliases collide (`foo` and `Foo` both had
  // `FooInput`, a declaration that did not compile).
  const taken = new Set(reservedNames);
  for (const [name, tool] of tools) {
    const { schema, optional } = inputOf(tool);
    const refs = refNamer(name, 'Input', schema, taken);
    const parameter = renderType(schema, refs, '  ');
    const output = outputOf(tool);
    const outputRefs = refNamer(name, 'Output', output, taken);
    const returned = renderType(output, outputRefs, '  ');
    const rootDescription =
      typeof schema === 'object' && typeof schema.description === 'string'
        ? [`@param input ${schema.description}`]
        : [];
    const doc = docComment(
      tool.description === undefined ? {} : { description: tool.description },
      '  ',
      rootDescription,
    );
    if (doc !== '') members.push(doc);
    members.push(`  ${name}(input${optional ? '?' : ''}: ${parameter}): Promise<${returned}>;`);
    aliases.push(...refs.aliases(), ...outputRefs.aliases());
  }
  const body =
    members.length === 0
      ? ['declare const tools: {};']
      : ['declare const tools: {', ...members, '};'];
  return [...aliases, ...body].join('\n');
}

/** The JSON Schema of what a tool answers: its `output` schema, or anything. */
function outputOf(tool: ToolDefinition): JsonSchema {
  if (tool.output === undefined) return true;
  try {
    // io 'output': what the host hands user code after the schema parsed it.
    return z.toJSONSchema(tool.output, { io: 'output', unrepresentable: 'any' }) as JsonSchema;
  } catch {
    return true;
  }
}
/** The JSON Schema of a tool's input (its parameter type), and whether the call may omit it. */
function inputOf(tool: ToolDefinition): { schema: JsonSchema; optional: boolean } {
  if (tool.input === undefined) return { schema: true, optional: true };
  let schema: JsonSchema;
  try {
    // io 'input': what the caller writes (a field with a default may be left out).
    schema = z.toJSONSchema(tool.input, { io: 'input', unrepresentable: 'any' }) as JsonSchema;
  } catch {
    schema = true;
  }
  let optional = false;
  try {
    optional = tool.input.safeParse(undefined).success;
  } catch {
    // A refinement that throws on undefined: the input is not optional.
  }
  return { schema, optional };
}

/**
 * Names the `$ref`s of one tool's schema (`#` for the root, `#/$defs/NAME` for a definition;
 * zod emits them for recursive schemas) after the tool, and renders the aliases they need.
 */
function refNamer(tool: string, rootSuffix: string, root: JsonSchema, taken: Set<string>) {
  const prefix = tool.charAt(0).toUpperCase() + tool.slice(1);
  const unique = (base: string) => {
    let name = base;
    for (let n = 2; taken.has(name); n++) name = `${base}_${n}`;
    taken.add(name);
    return name;
  };
  const defs =
    typeof root === 'object' && typeof root.$defs === 'object' && root.$defs !== null
      ? (root.$defs as Record<string, JsonSchema>)
      : {};
  const wanted = new Map<string, string>();
  const namer = {
    name(ref: string): string | undefined {
      const known = wanted.get(ref);
      if (known !== undefined) return known;
      const def = ref.startsWith('#/$defs/') ? ref.slice('#/$defs/'.length) : undefined;
      if (ref !== '#' && (def === undefined || !Object.hasOwn(defs, def))) return undefined;
      const suffix = def === undefined ? rootSuffix : def.replace(/[^\w$]/g, '_');
      const name = unique(`${prefix}${suffix.charAt(0).toUpperCase()}${suffix.slice(1)}`);
      wanted.set(ref, name);
      return name;
    },
    aliases(): string[] {
      const done = new Set<string>();
      const out: string[] = [];
      // Rendering an alias can name more references: go on until every one is rendered.
      for (let grew = true; grew; ) {
        grew = false;
        for (const [ref, name] of [...wanted]) {
          if (done.has(ref)) continue;
          done.add(ref);
          grew = true;
          const target = ref === '#' ? root : (defs[ref.slice('#/$defs/'.length)] as JsonSchema);
          out.push(`type ${name} = ${renderType(target, namer)};`);
        }
      }
      return out;
    },
  };
  return namer;
}
