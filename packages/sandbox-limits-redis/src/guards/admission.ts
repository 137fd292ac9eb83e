// What every guard does first: validate the context and find the id it keys on.
import {
  type ExecutionContext,
  ExecutionContextSchema,
  type GuardLease,
  isSandboxError,
  SandboxValidationError,
  validate,
} from '@coda/sandbox-core';

/** A lease with nothing to give back (budgets and rates are not returned when work ends). */
export const nothingToRelease = async (): Promise<void> => {};

const contextKeys: ReadonlySet<string> = new Set([
  'executionId',
  'userId',
  'conversationId',
  'turnId',
]);
const maxIdLength = 65_536;

/**
 * The common case, checked by hand because it runs on every admission (zod costs ~1 µs): a plain
 * object of known keys whose values are ids. Returns a copy (each property read once, so a getter
 * cannot answer differently later), or `undefined` to let the schema decide and explain.
 */
function plainContext(context: unknown): ExecutionContext | undefined {
  if (typeof context !== 'object' || context === null) return undefined;
  if (Object.getPrototypeOf(context) !== Object.prototype) return undefined;
  const copy: { [Key in keyof ExecutionContext]?: string } = {};
  for (const key of Object.keys(context)) {
    if (!contextKeys.has(key)) return undefined;
    const value: unknown = (context as Record<string, unknown>)[key];
    if (value === undefined && key !== 'executionId') continue;
    if (typeof value !== 'string' || value.length === 0 || value.length > maxIdLength) {
      return undefined;
    }
    copy[key as keyof ExecutionContext] = value;
  }
  return copy.executionId === undefined ? undefined : (copy as ExecutionContext);
}

/**
 * Validates `context` (the one boundary every guard shares) against core's
 * `ExecutionContextSchema` and returns a copy; anything but a plain, well-formed context goes
 * through the schema, which names every bad field. A context that throws when read (a getter, a
 * proxy) is refused with `VALIDATION` like any other bad context, never with its own error.
 */
export function checkContext(context: unknown, guard: string): ExecutionContext {
  try {
    return (
      plainContext(context) ??
      validate(ExecutionContextSchema, context, `execution context for ${guard}`)
    );
  } catch (error) {
    if (isSandboxError(error)) throw error;
    throw new SandboxValidationError(`Invalid execution context for ${guard}: reading it threw`, {
      issues: [{ path: '', message: 'reading it threw', received: '[object]' }],
    });
  }
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

/**
 * Builds a refusal without capturing a stack trace. A refusal is an expected answer, not a bug:
 * its stack would always point into this guard, and capturing it is most of what a refusal costs
 * (measured: about 55 % of a locally cached refusal). The limit is restored before returning;
 * nothing else runs in between (the error constructors call no user code).
 */
export function refusalWithoutStack<E extends Error>(create: () => E): E {
  const limit = Error.stackTraceLimit;
  Error.stackTraceLimit = 0;
  try {
    return create();
  } finally {
    Error.stackTraceLimit = limit;
  }
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
