// The parser protocol's request and response as zod schemas, and the JSON Schemas generated
// from them for runner authors (docs/parser-protocol.md shows them; a test keeps it in sync).
// The host checks every response against the response schema. The runner cannot use them: it
// runs under the permission model and imports nothing but wire.ts and json-cost.ts.
import { ParserLimitsSchema } from '@coda/sandbox-core';
import { z } from 'zod';
import { protocolVersion } from './wire.ts';

/** What the host writes on the child's stdin after the nonce and length. */
export const ParserRequestSchema = z.strictObject({
  v: z.literal(protocolVersion).describe('The protocol version.'),
  parser: z
    .string()
    .min(1)
    .describe(
      'Name of the exported function. Only an own export that is a function may be called.',
    ),
  payload: z.unknown().describe("Any JSON value: the function's first argument."),
  kwargs: z
    .record(z.string(), z.unknown())
    .describe("The function's second argument (keyword arguments)."),
  limits: ParserLimitsSchema.extend({
    maxOutputBytes: z
      .number()
      .int()
      .positive()
      .describe('The runner refuses a result whose JSON is larger (kind result-too-large).'),
  }).describe(
    'The limits of the call: already in force when the request arrives, or enforced by the host.',
  ),
});

/** Why a response is `{ ok: false }`. */
export const ResponseErrorKindSchema = z.enum([
  'parser-error',
  'unknown-parser',
  'load-error',
  'invalid-result',
  'result-too-large',
  'never-settled',
  'memory-exceeded',
  'invalid-payload',
]);

/** What the runner writes in its response frame. */
export const ParserResponseSchema = z.discriminatedUnion('ok', [
  z.object({
    ok: z.literal(true),
    data: z.unknown().describe("The parser's return value as JSON; null for undefined."),
  }),
  z.object({
    ok: z.literal(false),
    error: z.string().describe('What went wrong: a message cut at 16 384 characters, or less.'),
    kind: ResponseErrorKindSchema,
  }),
]);

function jsonSchema(schema: z.ZodType, name: string, title: string): Record<string, unknown> {
  const generated = z.toJSONSchema(schema, { target: 'draft-2020-12', io: 'input' });
  return {
    $schema: generated.$schema,
    $id: `https://coda-sandbox.dev/schemas/${name}-${protocolVersion}.json`,
    title: `${title} (protocol ${protocolVersion})`,
    ...Object.fromEntries(Object.entries(generated).filter(([key]) => key !== '$schema')),
  };
}

/** The JSON Schema (draft 2020-12) of a request, for runners written in other languages. */
export function parserRequestJsonSchema(): Record<string, unknown> {
  return jsonSchema(ParserRequestSchema, 'parser-request', 'Parser request');
}

/** The JSON Schema (draft 2020-12) of a response, for runners written in other languages. */
export function parserResponseJsonSchema(): Record<string, unknown> {
  return jsonSchema(ParserResponseSchema, 'parser-response', 'Parser response');
}
