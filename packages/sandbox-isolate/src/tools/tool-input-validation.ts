// A tool's input checked against its zod schema on the host, with what user code can make the
// host do per call bounded: zod builds an issue per bad element, and 100 000 wrong elements of an
// ordinary array schema stalled the host's event loop 0.7–1.9 s per call (issue 23). The input's
// value count is capped before zod runs; zod's early-aborting check (`z.validate`, which stops at
// the first failing child) decides, and only a small input is parsed again for its issues.
import { describeZodIssue, SandboxValidationError } from '@coda/sandbox-core';
import { z } from 'zod';

/**
 * Most JSON values (the input, every array element and object member) a tool input with a
 * schema may hold: more is refused before zod runs. Measured on the project's loaded 2-core
 * machine, zod takes 5–45 ms for 10 000 values that all fail (unions of objects the worst, see
 * docs/isolate.md); `maxRequestValues` still bounds tools without a schema and `dataProxy`.
 */
export const maxValidatedInputValues = 10_000;

/** Issues named in the error's message and `issues`; the rest are counted. */
export const maxReportedIssues = 10;

/**
 * Most values of a refused input whose issues are listed: zod's issues cost far more than its
 * check (an issue object, a path, a message per bad element; a union's per branch).
 */
export const maxDescribedInputValues = 100;

/**
 * Parses `input` with `schema`; throws a `SandboxValidationError` naming the first issues, or,
 * for a `large` input (more than {@link maxDescribedInputValues} values), saying only that it
 * does not match.
 */
export function validateToolInput(
  schema: z.ZodType,
  input: unknown,
  large: boolean,
  what: string,
): unknown {
  if (large && !z.validate(schema, input)) {
    throw new SandboxValidationError(
      `Invalid ${what}: it does not match the tool's input schema (issues are listed for inputs of up to ${maxDescribedInputValues} values; this one has more)`,
    );
  }
  const parsed = schema.safeParse(input);
  if (parsed.success) return parsed.data;
  const all = parsed.error.issues;
  const issues = all
    .slice(0, maxReportedIssues)
    .flatMap((issue) => describeZodIssue(issue, input, maxReportedIssues));
  const list = issues.map(
    (issue) => `${issue.path || '(root)'}: ${issue.message} (got ${issue.received})`,
  );
  const more = all.length > issues.length ? `; and ${all.length - issues.length} more` : '';
  throw new SandboxValidationError(`Invalid ${what}: ${list.join('; ')}${more}`, { issues });
}

/**
 * A handler's answer checked against the tool's `output` schema: zod's early-aborting check
 * first (an answer may be as big as maxDataBytes, and a failure's issues would echo it), then a
 * parse for the output value only when it matches.
 */
export function checkToolOutput(
  schema: z.ZodType,
  value: unknown,
): { ok: true; value: unknown } | { ok: false } {
  try {
    if (!z.validate(schema, value)) return { ok: false };
    const parsed = schema.safeParse(value);
    return parsed.success ? { ok: true, value: parsed.data } : { ok: false };
  } catch {
    // An async refinement or a throwing one: the answer is not known to match.
    return { ok: false };
  }
}
