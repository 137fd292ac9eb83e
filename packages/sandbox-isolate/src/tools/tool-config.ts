// SandboxEngineConfig.tools: named host functions user code calls as `await tools.NAME(input)`.
// The types, the zod schema of the option, and the lookup table the host dispatches through.
import { z } from 'zod';
import type { DataRequestInfo } from '../config/data-handler.ts';

/**
 * One named tool. User code calls it as `await tools.NAME(input)`; the call counts as a data
 * request (`maxDataRequests`, `maxDataBytes`, `maxRequestBytes`, `maxRequestValues`).
 */
export interface ToolDefinition<Input = unknown> {
  /**
   * What the tool does, written for the model: it becomes the doc comment of the tool in
   * `engine.toolDeclarations()`. At most 10 000 characters.
   */
  description?: string;
  /**
   * zod schema of the input, checked on the host before the handler runs (its parsed output is
   * what the handler gets). A refusal rejects the call in user code with a message naming each
   * bad field. The schema must be synchronous (no async refinements). It also gives the
   * parameter type in `engine.toolDeclarations()`. Without it the handler gets the input as sent
   * (any JSON value, or `undefined` when the call passed none).
   */
  input?: z.ZodType<Input>;
  /**
   * zod schema of what the handler answers, checked on the host before user code sees the value
   * (its parsed output is what user code gets): an answer that does not match rejects the call
   * in user code with "the tool's answer does not match its output schema". It also gives the
   * return type in `engine.toolDeclarations()` (without it, `Promise<unknown>`). Synchronous.
   */
  output?: z.ZodType;
  /**
   * Answers one call, with the same `info` (context, index, signal) as a `dataHandler`. Its
   * return value goes back as JSON (counted against `maxDataBytes`); a throw rejects the call in
   * user code with the error's message (host paths removed).
   */
  handler(input: Input, info: DataRequestInfo): unknown;
}

/**
 * The tools of an engine, by name (each a JavaScript identifier). A handler written inline gets
 * its input as `unknown`; {@link defineTool} types it from the schema (a handler is a method, so
 * a tool typed that way still fits here).
 */
export type ToolSet = Readonly<Record<string, ToolDefinition>>;

/**
 * Types a tool's handler input from its schema: `defineTool({ input: z.object({ id: z.string() }),
 * handler: (input) => input.id })` makes `input` `{ id: string }`.
 */
export function defineTool<Schema extends z.ZodType>(
  tool: ToolDefinition<z.output<Schema>> & { input: Schema },
): ToolDefinition<z.output<Schema>> {
  return tool;
}

/** Longest tool name; names are JavaScript identifiers, as a model will write them. */
export const maxToolNameLength = 64;
/** Most tools one engine may have: their declarations must fit in a prompt. */
export const maxTools = 256;

const isZodSchema = (value: unknown): value is z.ZodType =>
  typeof value === 'object' &&
  value !== null &&
  '_zod' in value &&
  typeof (value as { safeParse?: unknown }).safeParse === 'function';

// refine, not z.custom: a z.custom issue stops the checks of the whole set, and the names are
// checked after the fields so that one error names everything wrong.
const ToolSchema = z.strictObject({
  description: z.string().max(10_000).optional(),
  input: z.unknown().refine(isZodSchema, 'expected a zod schema').optional(),
  output: z.unknown().refine(isZodSchema, 'expected a zod schema').optional(),
  handler: z
    .unknown()
    .refine(
      (value): value is ToolDefinition['handler'] => typeof value === 'function',
      'expected a function',
    ),
});

const identifier = /^[A-Za-z_$][\w$]*$/;

/** Why `name` cannot name a tool, or undefined when it can. */
function badToolName(name: string): string | undefined {
  if (name.length > maxToolNameLength) return `is longer than ${maxToolNameLength} characters`;
  if (!identifier.test(name)) return 'expected a JavaScript identifier';
  return name === '__proto__' ? 'is reserved' : undefined;
}

/** The zod schema of `SandboxEngineConfig.tools`. */
export const ToolSetSchema = z.record(z.string(), ToolSchema).superRefine(
  (tools, context) => {
    const names = Object.keys(tools);
    if (names.length > maxTools) {
      context.addIssue({ code: 'custom', message: `at most ${maxTools} tools`, input: tools });
    }
    // Checked here rather than by a key schema, whose issues zod folds into "Invalid key".
    for (const name of names) {
      const problem = badToolName(name);
      if (problem !== undefined) {
        context.addIssue({ code: 'custom', message: problem, path: [name], input: name });
      }
    }
    // Also when a tool's fields are wrong, so that one error names everything.
  },
  { when: (payload) => typeof payload.value === 'object' && payload.value !== null },
);

/** The tools as the host dispatches through them: a Map, so no name reaches a prototype. */
export type ToolTable = ReadonlyMap<string, ToolDefinition>;

/** The table of a validated tool set (each definition copied, so later edits do not apply). */
export function toolTable(tools: ToolSet | undefined): ToolTable {
  const table = new Map<string, ToolDefinition>();
  for (const [name, tool] of Object.entries(tools ?? {})) table.set(name, { ...tool });
  return table;
}
