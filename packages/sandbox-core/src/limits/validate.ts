// Runs a zod schema at a public boundary and turns its issues into one SandboxValidationError
// that names every bad field and the value it got.
import type { z } from 'zod';
import { SandboxValidationError, type ValidationIssue } from '../errors/error-classes.ts';

/**
 * Parses `input` with `schema`. On failure throws one {@link SandboxValidationError} whose
 * message and `issues` list every bad field, what is wrong and the value received.
 * @param what - names the input in the message, such as `execution limits`.
 */
export function validate<Schema extends z.ZodType>(
  schema: Schema,
  input: unknown,
  what: string,
): z.output<Schema> {
  const parsed = schema.safeParse(input);
  if (parsed.success) return parsed.data;
  const issues = parsed.error.issues.flatMap((issue) => describeZodIssue(issue, input));
  const list = issues.map(
    (issue) => `${issue.path || '(root)'}: ${issue.message} (got ${issue.received})`,
  );
  throw new SandboxValidationError(`Invalid ${what}: ${list.join('; ')}`, { issues });
}

/**
 * Turns one zod issue into the {@link ValidationIssue}s a {@link SandboxValidationError} lists:
 * an unknown key is an issue of its own field, and each names the value it got (read without
 * running getters). For callers that run zod themselves and build their own error.
 * @param maxKeys - at most this many unknown keys of one issue are listed (hostile input can
 *   carry millions).
 */
export function describeZodIssue(
  issue: z.core.$ZodIssue,
  input: unknown,
  maxKeys = Number.POSITIVE_INFINITY,
): ValidationIssue[] {
  const paths =
    issue.code === 'unrecognized_keys'
      ? issue.keys.slice(0, maxKeys).map((key) => [...issue.path, key])
      : [issue.path];
  return paths.map((path) => ({
    path: path.map(String).join('.'),
    message: issue.code === 'unrecognized_keys' ? 'unknown option' : issue.message,
    received: describeValue(valueAt(input, path)),
  }));
}

function valueAt(input: unknown, path: readonly PropertyKey[]): unknown {
  let current = input;
  for (const segment of path) {
    if (typeof current !== 'object' || current === null) return undefined;
    if (!Object.hasOwn(current, segment)) return undefined;
    current = (current as Record<PropertyKey, unknown>)[segment];
  }
  return current;
}

const maxDescribedLength = 80;

/** A short, printable form of any value, safe for hostile input (no getters run, length capped). */
export function describeValue(value: unknown): string {
  let text: string;
  if (typeof value === 'string') text = JSON.stringify(value);
  else if (typeof value === 'bigint') text = `${value}n`;
  else if (typeof value === 'function') text = '[function]';
  else if (typeof value === 'symbol') text = value.toString();
  else if (Array.isArray(value)) text = `[array of ${value.length}]`;
  else if (typeof value === 'object' && value !== null) text = '[object]';
  else text = String(value);
  return text.length > maxDescribedLength ? `${text.slice(0, maxDescribedLength)}…` : text;
}
