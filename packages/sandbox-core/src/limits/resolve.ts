// Merges validated partial limits over a base; shared by every kind of limits in this package.
import type { z } from 'zod';
import { validate } from './validate.ts';

/**
 * Validates `partial` with the strict partial `schema` and returns `base` with the given
 * fields replaced. Fields set to `undefined` keep the base value. Throws a
 * `SandboxValidationError` naming every bad or unknown field.
 */
export function resolveOver<Full extends object>(
  schema: z.ZodType<{ [Key in keyof Full]?: Full[Key] | undefined }>,
  base: Full,
  partial: unknown,
  what: string,
): Full {
  const parsed = validate(schema, partial ?? {}, what);
  const given = Object.fromEntries(
    Object.entries(parsed).filter(([, value]) => value !== undefined),
  );
  return { ...base, ...given };
}
