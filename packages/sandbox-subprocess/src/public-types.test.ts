// The documented option types and the zod schemas that validate them must describe the same
// objects: a field added to one and not the other fails the package's typecheck (`tsc`, part of
// `pnpm test`). Results narrow on `success`.
import type { SandboxErrorCode } from '@coda/sandbox-core';
import { describe, expectTypeOf, it } from 'vitest';
import type { z } from 'zod';
import type {
  PartialPolicySchema,
  Rlimits,
  RlimitsSchema,
  SubprocessPolicy,
  SubprocessPolicyInput,
  SubprocessPolicySchema,
} from './policy/subprocess-policy.ts';
import type { SandboxFailureCode, SandboxResult } from './process/sandbox-result.ts';
import type {
  RunOptions,
  RunOptionsSchema,
  SpawnOptions,
  SpawnOptionsSchema,
} from './process/spawn-options.ts';

describe('option types and their schemas', () => {
  it('agree on input and output, field for field', () => {
    expectTypeOf<Rlimits>().toEqualTypeOf<z.input<typeof RlimitsSchema>>();
    expectTypeOf<Rlimits>().toEqualTypeOf<z.output<typeof RlimitsSchema>>();
    expectTypeOf<SubprocessPolicy>().toEqualTypeOf<z.input<typeof SubprocessPolicySchema>>();
    expectTypeOf<SubprocessPolicy>().toEqualTypeOf<z.output<typeof SubprocessPolicySchema>>();
    expectTypeOf<SubprocessPolicyInput>().toEqualTypeOf<z.input<typeof PartialPolicySchema>>();
    expectTypeOf<SubprocessPolicyInput>().toEqualTypeOf<z.output<typeof PartialPolicySchema>>();
    expectTypeOf<SpawnOptions>().toEqualTypeOf<z.input<typeof SpawnOptionsSchema>>();
    expectTypeOf<SpawnOptions>().toEqualTypeOf<z.output<typeof SpawnOptionsSchema>>();
    expectTypeOf<RunOptions>().toEqualTypeOf<z.input<typeof RunOptionsSchema>>();
    expectTypeOf<RunOptions>().toEqualTypeOf<z.output<typeof RunOptionsSchema>>();
  });
});

describe('SandboxResult', () => {
  it('narrows on success: a failure has a code from core’s table and an error', () => {
    expectTypeOf<SandboxFailureCode>().toExtend<SandboxErrorCode>();
    const narrow = (result: SandboxResult) => {
      if (result.success) {
        expectTypeOf(result.exitCode).toEqualTypeOf<0>();
        expectTypeOf(result.code).toEqualTypeOf<undefined>();
        return;
      }
      expectTypeOf(result.code).toEqualTypeOf<SandboxFailureCode>();
      expectTypeOf(result.error).toEqualTypeOf<string>();
    };
    expectTypeOf(narrow).toBeFunction();
  });
});
