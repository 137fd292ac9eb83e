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
  const issues = parsed.error.issues.flatMap((issue) => toValidationIssues(issue, input));
  const list = issues.map(
    (issue) => `${issue.path || '(root)'}: ${issue.message} (got ${issue.received})`,
  );
  throw new SandboxValidationError(`Invalid ${what}: ${list.join('; ')}`, { issues });
}

function toValidationIssues(issue: z.core.$ZodIssue, input: unknown): ValidationIssue[] {
  if (issue.code === 'unrecognized_keys') {
    return issue.keys.map((key) => {
      const path = [...issue.path, key];
      return {
        path: formatPath(path),
        message: 'unknown option',
        received: describeValue(valueAt(input, path)),
      };
    });
  }
  return [
    {
      path: formatPath(issue.path),
      message: issue.message,
      received: describeValue(valueAt(input, issue.path)),
    },
  ];
}

function formatPath(path: readonly PropertyKey[]): string {
  return path.map((segment) => String(segment)).join('.');
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
