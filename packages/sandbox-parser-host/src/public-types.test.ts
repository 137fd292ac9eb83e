// The documented option types and the zod schemas that validate them must describe the same
// objects: a field added to one and not the other fails the package's typecheck (`tsc`, part of
// `pnpm test`). Results narrow on `ok`.
import type { JsonValue, SandboxErrorCode } from '@coda/sandbox-core';
import { describe, expectTypeOf, it } from 'vitest';
import type { z } from 'zod';
import type {
  ConfinementMode,
  ConfinementModeSchema,
  ParserHostOptions,
  ParserHostOptionsSchema,
  RunParserOptions,
  RunParserOptionsSchema,
} from './host/options.ts';
import type { ParserResult } from './host/result.ts';

describe('option types and their schemas', () => {
  it('agree on input and output, field for field', () => {
    expectTypeOf<ConfinementMode>().toEqualTypeOf<z.input<typeof ConfinementModeSchema>>();
    expectTypeOf<ConfinementMode>().toEqualTypeOf<z.output<typeof ConfinementModeSchema>>();
    expectTypeOf<ParserHostOptions>().toEqualTypeOf<z.input<typeof ParserHostOptionsSchema>>();
    expectTypeOf<ParserHostOptions>().toEqualTypeOf<z.output<typeof ParserHostOptionsSchema>>();
    expectTypeOf<RunParserOptions>().toEqualTypeOf<z.input<typeof RunParserOptionsSchema>>();
    expectTypeOf<RunParserOptions>().toEqualTypeOf<z.output<typeof RunParserOptionsSchema>>();
  });
});

describe('ParserResult', () => {
  it('narrows on ok: a success has data, a failure an error and a code', () => {
    const narrow = (result: ParserResult<{ rows: number }>) => {
      if (result.ok) {
        expectTypeOf(result.data).toEqualTypeOf<{ rows: number }>();
        expectTypeOf(result.code).toEqualTypeOf<undefined>();
        return;
      }
      expectTypeOf(result.code).toEqualTypeOf<SandboxErrorCode>();
      expectTypeOf(result.error).toEqualTypeOf<string>();
      expectTypeOf(result.data).toEqualTypeOf<undefined>();
    };
    expectTypeOf(narrow).toBeFunction();
    expectTypeOf<ParserResult>().toEqualTypeOf<ParserResult<JsonValue>>();
  });
});
