// Renders a JSON Schema (as zod's z.toJSONSchema or an MCP server produces it) as a TypeScript type
// for a model to read: property descriptions and defaults become doc comments. What TypeScript
// cannot say (patterns, bounds) is left to the host's validation; what the renderer does not know
// becomes `unknown`, never a type narrower than the schema.

/** A JSON Schema: an object of keywords, or `true` / `false`. */
export type JsonSchema = boolean | { readonly [keyword: string]: unknown };

/** How `$ref`s are named: the renderer asks for a type name per reference it meets. */
export interface RefNamer {
  /** The type name for `ref` (`#` or `#/$defs/NAME`), or undefined to render it as `unknown`. */
  name(ref: string): string | undefined;
}

const identifier = /^[A-Za-z_$][\w$]*$/;
/** Nesting past this renders `unknown`: declarations are for a prompt, not for a proof. */
const maxRenderDepth = 32;

/** The TypeScript type of `schema`; nested lines are indented by `indent` plus two spaces. */
export function renderType(schema: JsonSchema, refs: RefNamer, indent = '', depth = 0): string {
  if (schema === true) return 'unknown';
  if (schema === false) return 'never';
  if (typeof schema !== 'object' || schema === null || depth > maxRenderDepth) return 'unknown';
  const next = (child: unknown) => renderType(child as JsonSchema, refs, indent, depth + 1);
  if (typeof schema.$ref === 'string') return refs.name(schema.$ref) ?? 'unknown';
  if ('const' in schema) return literal(schema.const);
  if (Array.isArray(schema.enum)) return union(schema.enum.map(literal));
  const branches = schema.anyOf ?? schema.oneOf;
  if (Array.isArray(branches)) return union(branches.map(next));
  if (Array.isArray(schema.allOf)) {
    return schema.allOf.length === 0 ? 'unknown' : schema.allOf.map(next).map(wrap).join(' & ');
  }
  const types = Array.isArray(schema.type) ? schema.type : [schema.type];
  if (types.length === 0 || types.every((type) => typeof type !== 'string')) {
    // No type keyword: an object or array schema may still be implied by its keywords.
    if (schema.properties !== undefined) return objectType(schema, refs, indent, depth);
    if (schema.items !== undefined || schema.prefixItems !== undefined) {
      return arrayType(schema, next);
    }
    return 'unknown';
  }
  return union(
    types.map((type) => {
      switch (type) {
        case 'string':
          return 'string';
        case 'number':
        case 'integer':
          return 'number';
        case 'boolean':
          return 'boolean';
        case 'null':
          return 'null';
        case 'array':
          return arrayType(schema, next);
        case 'object':
          return objectType(schema, refs, indent, depth);
        default:
          return 'unknown';
      }
    }),
  );
}

function arrayType(schema: { readonly [keyword: string]: unknown }, next: (s: unknown) => string) {
  const prefix = schema.prefixItems;
  if (Array.isArray(prefix)) {
    const rest = schema.items === undefined || schema.items === false ? '' : next(schema.items);
    const members = prefix.map(next);
    if (rest !== '') members.push(`...${wrap(rest)}[]`);
    return `[${members.join(', ')}]`;
  }
  return schema.items === undefined ? 'unknown[]' : `${wrap(next(schema.items))}[]`;
}

function objectType(
  schema: { readonly [keyword: string]: unknown },
  refs: RefNamer,
  indent: string,
  depth: number,
): string {
  const inner = `${indent}  `;
  const properties =
    typeof schema.properties === 'object' && schema.properties !== null
      ? Object.entries(schema.properties as Record<string, JsonSchema>)
      : [];
  const required = new Set(Array.isArray(schema.required) ? schema.required : []);
  const extra = schema.additionalProperties;
  const extraType =
    extra === undefined || extra === true
      ? properties.length === 0
        ? 'unknown'
        : undefined
      : extra === false
        ? undefined
        : renderType(extra as JsonSchema, refs, inner, depth + 1);
  if (properties.length === 0) {
    return extraType === undefined ? 'Record<string, never>' : `Record<string, ${extraType}>`;
  }
  const lines = ['{'];
  for (const [name, property] of properties) {
    const doc = docComment(property, inner);
    if (doc !== '') lines.push(doc);
    const key = identifier.test(name) ? name : JSON.stringify(name);
    const optional = required.has(name) ? '' : '?';
    lines.push(`${inner}${key}${optional}: ${renderType(property, refs, inner, depth + 1)};`);
  }
  if (extraType !== undefined) lines.push(`${inner}[key: string]: ${extraType};`);
  lines.push(`${indent}}`);
  return lines.join('\n');
}

/** The doc comment of a schema's description, default and format at `indent` ('' when none). */
export function docComment(schema: JsonSchema, indent: string, extra: string[] = []): string {
  const text: string[] = [];
  if (typeof schema === 'object' && schema !== null) {
    if (typeof schema.description === 'string') text.push(...schema.description.split('\n'));
    if (typeof schema.format === 'string') text.push(`@format ${schema.format}`);
    if ('default' in schema) text.push(`@default ${JSON.stringify(schema.default)}`);
  }
  text.push(...extra);
  if (text.length === 0) return '';
  // A description must not end the comment it sits in.
  const safe = text.map((line) => line.replaceAll('*/', '*\\/'));
  if (safe.length === 1) return `${indent}/** ${safe[0]} */`;
  return [
    `${indent}/**`,
    ...safe.map((line) => `${indent} * ${line}`.trimEnd()),
    `${indent} */`,
  ].join('\n');
}

function literal(value: unknown): string {
  if (value === null || ['string', 'number', 'boolean'].includes(typeof value)) {
    return JSON.stringify(value);
  }
  return 'unknown';
}

function union(members: string[]): string {
  const unique = [...new Set(members)];
  if (unique.includes('unknown')) return 'unknown';
  // No parentheses: a member that is a union flattens, and & binds tighter than |.
  return unique.length === 0 ? 'never' : unique.join(' | ');
}

/** Parenthesises a union or intersection where it would bind wrongly (in `T[]`, in a union). */
function wrap(type: string): string {
  if (type.startsWith('{') || type.startsWith('[')) return type;
  return /[|&]/.test(type) && !/^"[^"]*"$/.test(type) ? `(${type})` : type;
}
