// What POST /v1/executions accepts, checked with zod at the boundary: the body and the caller's
// identity, with every bad field named in one 400. Limits may only be tightened: a client can
// ask for less memory or time than the server allows, never more.
import {
  defaultExecutionLimits,
  type ExecutionLimits,
  ExecutionLimitsSchema,
  SandboxValidationError,
  type ValidationIssue,
  validate,
} from '@coda/sandbox-core';
import { z } from 'zod';

const identifier = z.string().min(1).max(256);

/** Builds the body schema for a server whose ceilings are `maxLimits`. */
function executionBodySchema(maxLimits: Readonly<ExecutionLimits>) {
  const limits = ExecutionLimitsSchema.partial()
    .superRefine((given, context) => {
      for (const [key, value] of Object.entries(given) as [keyof ExecutionLimits, number][]) {
        // A value the field's own rule refuses is already reported; name each problem once.
        if (!ExecutionLimitsSchema.shape[key].safeParse(value).success) continue;
        const ceiling = maxLimits[key];
        if (value > ceiling) {
          context.addIssue({
            code: 'too_big',
            origin: 'number',
            maximum: ceiling,
            inclusive: true,
            path: [key],
            input: value,
            message: `at most ${ceiling} on this server`,
          });
        }
      }
    })
    .transform(withoutUndefined);
  return z.strictObject({
    /** The body of an async function; its size is the engine's to judge (`maxCodeBytes`). */
    code: z.string().min(1),
    limits: limits.optional(),
    /** Tier 3 counts executions per (conversationId, turnId) when both are given. */
    conversationId: identifier.optional(),
    turnId: identifier.optional(),
  });
}

/** Drops fields given as `undefined`, so they keep the engine's defaults. */
function withoutUndefined(
  limits: {
    [Key in keyof ExecutionLimits]?: number | undefined;
  },
): Partial<ExecutionLimits> {
  return Object.fromEntries(Object.entries(limits).filter(([, value]) => value !== undefined));
}

/** A validated execution request. */
export type ExecutionRequestBody = z.infer<ReturnType<typeof executionBodySchema>>;

/** A validated request and who sent it. */
export interface ExecutionRequest {
  body: ExecutionRequestBody;
  userId: string;
}

/** Validates a request body and the caller's `x-user-id` header. */
export type ExecutionRequestParser = (
  body: unknown,
  userIdHeader: string | string[] | undefined,
) => ExecutionRequest;

/**
 * A parser for a server whose limit ceilings are `maxLimits` (the defaults unless given). It
 * validates the body and the header together and throws one `SandboxValidationError` listing
 * every bad field (the header as `headers.x-user-id`).
 */
export function createExecutionRequestParser(
  maxLimits: Readonly<ExecutionLimits> = defaultExecutionLimits,
): ExecutionRequestParser {
  const schema = executionBodySchema(maxLimits);
  return (body, userIdHeader) => parseWith(schema, body, userIdHeader);
}

function parseWith(
  schema: ReturnType<typeof executionBodySchema>,
  body: unknown,
  userIdHeader: string | string[] | undefined,
): ExecutionRequest {
  const issues: ValidationIssue[] = [];
  let parsed: ExecutionRequestBody | undefined;
  try {
    parsed = validate(schema, body, 'execution request');
  } catch (error) {
    if (!(error instanceof SandboxValidationError)) throw error;
    issues.push(...error.issues);
  }
  const userId = typeof userIdHeader === 'string' ? userIdHeader.trim() : '';
  if (userId === '' || userId.length > 256) {
    issues.push({
      path: 'headers.x-user-id',
      message: 'required: the id of the user the execution runs for (1 to 256 characters)',
      received: userIdHeader === undefined ? 'undefined' : `[${userId.length} characters]`,
    });
  }
  if (issues.length > 0 || parsed === undefined) {
    const list = issues.map((issue) => `${issue.path || '(root)'}: ${issue.message}`).join('; ');
    throw new SandboxValidationError(`Invalid execution request: ${list}`, { issues });
  }
  return { body: parsed, userId };
}
