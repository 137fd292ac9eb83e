// engine.toolDeclarations(): the TypeScript declaration of the `tools` object user code sees,
// generated from each tool's zod schema (through zod's own JSON Schema output) with the
// descriptions as doc comments, to put in a model's prompt.
import { z } from 'zod';
import { docComment, type JsonSchema, renderType } from './json-schema-to-typescript.ts';
import type { ToolDefinition, ToolTable } from './tool-config.ts';

/** The declarations of `tools`, one method per tool, plus the types recursive schemas refer to. */
export function renderToolDeclarations(tools: ToolTable): string {
  const aliases: string[] = [];
  const members: string[] = [];
  for (const [name, tool] of tools) {
    const { schema, optional } = inputOf(tool);
    const refs = refNamer(name, schema);
    const parameter = renderType(schema, refs, '  ');
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
    members.push(`  ${name}(input${optional ? '?' : ''}: ${parameter}): Promise<unknown>;`);
    aliases.push(...refs.aliases());
  }
  const body =
    members.length === 0
      ? ['declare const tools: {};']
      : ['declare const tools: {', ...members, '};'];
  return [...aliases, ...body].join('\n');
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
function refNamer(tool: string, root: JsonSchema) {
  const prefix = tool.charAt(0).toUpperCase() + tool.slice(1);
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
      const suffix = def === undefined ? 'Input' : def.replace(/[^\w$]/g, '_');
      const name = `${prefix}${suffix.charAt(0).toUpperCase()}${suffix.slice(1)}`;
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
