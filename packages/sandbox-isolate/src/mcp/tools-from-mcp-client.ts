// toolsFromMcpClient: the tools of a connected MCP client (the official @modelcontextprotocol/sdk)
// as SandboxEngineConfig.tools entries. The client is typed by the two methods used, so this
// module imports nothing from the SDK: it is an optional peer the caller already has.
import { SandboxValidationError, validate } from '@coda/sandbox-core';
import { z } from 'zod';
import { maxToolNameLength, maxTools, type ToolDefinition } from '../tools/tool-config.ts';

/** One tool as an MCP server lists it. */
export interface McpToolListing {
  /** The tool's name on the server (`get-weather`). */
  name: string;
  /** What the tool does; becomes the doc comment of its declaration. */
  description?: string | undefined;
  /** JSON Schema of the arguments (an object schema, as MCP requires). */
  inputSchema: { [keyword: string]: unknown };
  /** JSON Schema of the tool's `structuredContent` (MCP `outputSchema`), when it declares one. */
  outputSchema?: { [keyword: string]: unknown } | undefined;
}

/** What a tool call returns over MCP (the fields this adapter reads). */
export interface McpToolResult {
  /** The result's content items; the adapter reads the text of `text` items. */
  content?: readonly {
    /** The item's kind: `text`, `image`, `resource`, ... */
    type: string;
    /** The text of a `text` item. */
    text?: string;
    [field: string]: unknown;
  }[];
  /** The result as a JSON object, when the tool declares an output schema. */
  structuredContent?: { [field: string]: unknown } | undefined;
  /** The tool failed; the call rejects in user code with the content's text. */
  isError?: boolean | undefined;
}

/**
 * The part of the SDK's `Client` this adapter uses: a connected
 * `new Client(...)` from `@modelcontextprotocol/sdk/client/index.js` fits it.
 */
export interface McpToolClient {
  /** Lists one page of the server's tools; `nextCursor` asks for the next page. */
  listTools(params?: { cursor?: string }): Promise<{
    /** The tools of this page. */
    tools: readonly McpToolListing[];
    /** Where the next page starts; absent on the last page. */
    nextCursor?: string | undefined;
  }>;
  /** Calls one tool with its arguments; resolves with an {@link McpToolResult}. */
  callTool(
    params: { name: string; arguments?: Record<string, unknown> },
    resultSchema?: undefined,
    options?: { signal?: AbortSignal },
  ): Promise<unknown>;
}

/** Options of {@link toolsFromMcpClient}. */
export interface McpToolsOptions {
  /**
   * Put before every tool name (`github_` makes `create-issue` `tools.github_create_issue`), to
   * keep the tools of several servers apart. A JavaScript identifier. Default none.
   */
  prefix?: string | undefined;
}

/** Validates {@link McpToolsOptions}. */
export const McpToolsOptionsSchema = z.strictObject({
  prefix: z
    .string()
    .max(32)
    .regex(/^[A-Za-z_$][\w$]*$/, 'expected a JavaScript identifier')
    .optional(),
});

/** Most pages of listTools read: a server that never stops paging must not stall the host. */
const maxPages = 100;

/**
 * Lists the tools of a connected MCP client and returns them as `tools` entries: each calls the
 * server's tool, its JSON Schema input is converted with zod's `z.fromJSONSchema` so that input is
 * validated on the host before the call (and rendered by `engine.toolDeclarations()`), and its
 * description becomes the declaration's doc comment. A name that is not a JavaScript identifier
 * gets `_` for each character that cannot be in one (`get-weather` → `get_weather`).
 *
 * A call resolves with the result's `structuredContent` when the server sends one, else with its
 * text (the text items joined) when all content is text, else with the content array. A result
 * with `isError` rejects in user code with its text.
 *
 * ```ts
 * const client = new Client({ name: 'agent', version: '1.0.0' });
 * await client.connect(new StdioClientTransport({ command: 'weather-server' }));
 * const engine = new SandboxEngine({ tools: await toolsFromMcpClient(client) });
 * ```
 */
export async function toolsFromMcpClient(
  client: McpToolClient,
  options: McpToolsOptions = {},
): Promise<Record<string, ToolDefinition>> {
  const { prefix = '' } = validate(McpToolsOptionsSchema, options, 'toolsFromMcpClient options');
  const tools: Record<string, ToolDefinition> = {};
  const origins = new Map<string, string>();
  let cursor: string | undefined;
  for (let page = 0; page < maxPages; page++) {
    const listed = await client.listTools(cursor === undefined ? undefined : { cursor });
    for (const listing of listed.tools) {
      const name = prefix + identifierOf(listing.name);
      const clash = origins.get(name);
      if (clash !== undefined) throw nameError(name, `both ${clash} and ${listing.name}`);
      if (name.length > maxToolNameLength) throw nameError(name, 'is too long');
      // Assigned below, `__proto__` would set the prototype of the result, and the tool would
      // vanish without a word (found by our attack review).
      if (name === '__proto__') throw nameError(name, 'is reserved');
      origins.set(name, listing.name);
      if (origins.size > maxTools)
        throw nameError('', `the server lists more than ${maxTools} tools`);
      tools[name] = toolOf(client, listing);
    }
    cursor = listed.nextCursor;
    if (cursor === undefined) break;
  }
  return tools;
}

function toolOf(client: McpToolClient, listing: McpToolListing): ToolDefinition {
  const input = inputSchemaOf(listing.inputSchema);
  const tool: ToolDefinition = {
    input,
    handler: async (args, info) => {
      const result = (await client.callTool(
        { name: listing.name, arguments: (args ?? {}) as Record<string, unknown> },
        undefined,
        { signal: info.signal },
      )) as McpToolResult;
      return resultOf(result);
    },
  };
  if (typeof listing.description === 'string') tool.description = listing.description;
  const output = outputSchemaOf(listing.outputSchema);
  if (output !== undefined) tool.output = output;
  return tool;
}

/**
 * The zod schema of an MCP input schema. One zod cannot convert is validated as an object only,
 * the server checking the rest. Arguments with no required field may be left out.
 */
function inputSchemaOf(inputSchema: { [keyword: string]: unknown }): z.ZodType {
  let schema: z.ZodType;
  try {
    schema = z.fromJSONSchema(inputSchema as z.core.JSONSchema.JSONSchema);
  } catch {
    schema = z.record(z.string(), z.unknown());
  }
  const required = inputSchema.required;
  return Array.isArray(required) && required.length > 0 ? schema : schema.optional();
}

/**
 * The zod schema of an MCP `outputSchema`: the tool's answer (its `structuredContent`) is checked
 * against it on the host and it gives the tool's return type. One zod cannot convert is left out.
 */
function outputSchemaOf(outputSchema: unknown): z.ZodType | undefined {
  if (typeof outputSchema !== 'object' || outputSchema === null) return undefined;
  try {
    return z.fromJSONSchema(outputSchema as z.core.JSONSchema.JSONSchema);
  } catch {
    return undefined;
  }
}

function resultOf(result: McpToolResult): unknown {
  const content = Array.isArray(result.content) ? result.content : [];
  const allText = content.every((item) => item.type === 'text' && typeof item.text === 'string');
  const text = allText ? content.map((item) => item.text).join('\n') : undefined;
  if (result.isError === true) throw new Error(text ?? 'The MCP tool reported an error');
  if (result.structuredContent !== undefined) return result.structuredContent;
  return text ?? content;
}

function identifierOf(name: string): string {
  const replaced = name.replace(/[^\w$]/g, '_');
  return /^[0-9]/.test(replaced) ? `_${replaced}` : replaced;
}

function nameError(name: string, message: string): SandboxValidationError {
  const issue = { path: name === '' ? 'tools' : `tools.${name}`, message, received: name };
  return new SandboxValidationError(`toolsFromMcpClient: ${issue.path}: ${message}`, {
    issues: [issue],
  });
}
