// What every guard does first: validate the context and find the id it keys on.
import {
  type ExecutionContext,
  ExecutionContextSchema,
  type GuardLease,
  SandboxValidationError,
  validate,
} from '@coda/sandbox-core';

/** A lease with nothing to give back (budgets and rates are not returned when work ends). */
export const nothingToRelease = async (): Promise<void> => {};

/** Validates `context` (the one boundary every guard shares) and returns it parsed. */
export function checkContext(context: unknown, guard: string): ExecutionContext {
  return validate(ExecutionContextSchema, context, `execution context for ${guard}`);
}

/**
 * The id a guard keys on, or `undefined` when it is absent and the guard admits such executions.
 * Refuses with `VALIDATION` naming the field when it is absent and `whenMissing` is `refuse`.
 */
export function requiredId(
  context: ExecutionContext,
  field: 'userId' | 'turnId',
  whenMissing: 'refuse' | 'allow',
  guard: string,
): string | undefined {
  const id = context[field];
  if (id !== undefined || whenMissing === 'allow') return id;
  throw new SandboxValidationError(`${guard} needs context.${field} to enforce its limit`, {
    issues: [{ path: field, message: 'required by this guard', received: 'undefined' }],
    details: { guard },
  });
}

/** A lease whose `release` runs once, never throws, and carries extra read-only fields. */
export function lease<Extra extends object>(
  extra: Extra,
  release: () => Promise<void> = nothingToRelease,
): GuardLease & Extra {
  let done: Promise<void> | undefined;
  return {
    ...extra,
    release: () => {
      done ??= release().catch(() => {});
      return done;
    },
  };
}
