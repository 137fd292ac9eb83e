// What POST /v1/executions accepts, checked with zod at the boundary (through
// @hono/zod-validator): the body and the caller's `x-user-id`, every bad field named in one 400.
// Limits may only be tightened: a client can ask for less memory or time than the server allows,
// never more.
import {
  type ExecutionLimits,
  ExecutionLimitsSchema,
  SandboxValidationError,
  type ValidationIssue,
  validate,
} from '@coda/sandbox-core';
import { type Hook, zValidator } from '@hono/zod-validator';
import { z } from 'zod';
import type { DemoEnv } from './server-env.ts';

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

/** A validated execution request body. */
export type ExecutionRequestBody = z.infer<ReturnType<typeof executionBodySchema>>;

const userRequired = 'required: the id of the user the execution runs for';
const userIdHeader = z
  .string({ error: userRequired })
  .trim()
  .min(1, { error: userRequired })
  .max(256);

/**
 * Middleware that validates the JSON body against the server's ceilings and the `x-user-id`
 * header together, and throws one `SandboxValidationError` listing every bad field (the header as
 * `headers.x-user-id`). The body is then `c.req.valid('json')`, the user `c.get('userId')`.
 */
export function validateExecutionRequest(maxLimits: Readonly<ExecutionLimits>) {
  const schema = executionBodySchema(maxLimits);
  type Body = z.output<typeof schema>;
  const check: Hook<Body, DemoEnv, string, 'json', object, typeof schema> = (result, c) => {
    const user = userIdHeader.safeParse(c.req.header('x-user-id'));
    if (result.success && user.success) {
      c.set('userId', user.data);
      return;
    }
    const issues: ValidationIssue[] = [
      ...(result.success ? [] : issuesOf(schema, result.data)),
      ...(user.success
        ? []
        : issuesOf(userIdHeader, c.req.header('x-user-id'), 'headers.x-user-id')),
    ];
    const list = issues.map((issue) => `${issue.path}: ${issue.message}`).join('; ');
    throw new SandboxValidationError(`Invalid execution request: ${list}`, { issues });
  };
  return zValidator<typeof schema, 'json', DemoEnv, string, typeof check>('json', schema, check);
}

/** Core's readable issues for `input` (each field, message and the value received). */
function issuesOf(schema: z.ZodType, input: unknown, path?: string): ValidationIssue[] {
  try {
    validate(schema, input, 'execution request');
    return [];
  } catch (error) {
    if (!(error instanceof SandboxValidationError)) throw error;
    return error.issues.map((issue) => (path === undefined ? issue : { ...issue, path }));
  }
}
