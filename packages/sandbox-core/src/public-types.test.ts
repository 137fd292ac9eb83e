// The documented option types and the zod schemas that validate them must describe the same
// objects: a field added to one and not the other fails the package's typecheck (`tsc`, part of
// `pnpm test`). The error classes must narrow `code` after `instanceof`.
import { describe, expect, expectTypeOf, it } from 'vitest';
import type { z } from 'zod';
import { SandboxErrorCode } from './errors/codes.ts';
import {
  SandboxBudgetExhaustedError,
  SandboxCancelledError,
  SandboxCapacityError,
  SandboxCrashError,
  SandboxLimitExceededError,
  SandboxOOMError,
  SandboxRateLimitedError,
  SandboxRuntimeError,
  SandboxTimeoutError,
  SandboxUnavailableError,
  SandboxValidationError,
} from './errors/error-classes.ts';
import type { ExecutionContext, ExecutionContextSchema } from './guards/execution-guard.ts';
import type {
  BridgeLimits,
  BridgeLimitsSchema,
  ExecutionLimits,
  ExecutionLimitsSchema,
  IsolateLimits,
  IsolateLimitsSchema,
} from './limits/execution-limits.ts';
import type { ParserLimits, ParserLimitsSchema } from './limits/parser-limits.ts';
import type { SandboxPolicy, SandboxPolicySchema } from './limits/sandbox-policy.ts';
import type { NetworkPolicy, NetworkPolicySchema } from './network/network-policy.ts';

describe('option types and their schemas', () => {
  it('agree on input and output, field for field', () => {
    expectTypeOf<IsolateLimits>().toEqualTypeOf<z.input<typeof IsolateLimitsSchema>>();
    expectTypeOf<IsolateLimits>().toEqualTypeOf<z.output<typeof IsolateLimitsSchema>>();
    expectTypeOf<BridgeLimits>().toEqualTypeOf<z.input<typeof BridgeLimitsSchema>>();
    expectTypeOf<BridgeLimits>().toEqualTypeOf<z.output<typeof BridgeLimitsSchema>>();
    expectTypeOf<ExecutionLimits>().toEqualTypeOf<z.input<typeof ExecutionLimitsSchema>>();
    expectTypeOf<ExecutionLimits>().toEqualTypeOf<z.output<typeof ExecutionLimitsSchema>>();
    expectTypeOf<ParserLimits>().toEqualTypeOf<z.input<typeof ParserLimitsSchema>>();
    expectTypeOf<ParserLimits>().toEqualTypeOf<z.output<typeof ParserLimitsSchema>>();
    expectTypeOf<SandboxPolicy>().toEqualTypeOf<z.input<typeof SandboxPolicySchema>>();
    expectTypeOf<SandboxPolicy>().toEqualTypeOf<z.output<typeof SandboxPolicySchema>>();
    expectTypeOf<NetworkPolicy>().toEqualTypeOf<z.input<typeof NetworkPolicySchema>>();
    expectTypeOf<NetworkPolicy>().toEqualTypeOf<z.output<typeof NetworkPolicySchema>>();
    expectTypeOf<ExecutionContext>().toEqualTypeOf<z.input<typeof ExecutionContextSchema>>();
    expectTypeOf<ExecutionContext>().toEqualTypeOf<z.output<typeof ExecutionContextSchema>>();
  });
});

describe('error classes', () => {
  it('each carry the literal code of their class', () => {
    const thrown: unknown = new SandboxTimeoutError();
    if (!(thrown instanceof SandboxTimeoutError)) throw new Error('expected a timeout error');
    expectTypeOf(thrown.code).toEqualTypeOf<'TIMEOUT'>();

    const codes = {
      TIMEOUT: new SandboxTimeoutError().code,
      OOM: new SandboxOOMError().code,
      VALIDATION: new SandboxValidationError('m').code,
      LIMIT_EXCEEDED: new SandboxLimitExceededError('m').code,
      RUNTIME: new SandboxRuntimeError('m').code,
      CAPACITY: new SandboxCapacityError('m').code,
      RATE_LIMITED: new SandboxRateLimitedError('m').code,
      BUDGET_EXHAUSTED: new SandboxBudgetExhaustedError('m').code,
      CANCELLED: new SandboxCancelledError().code,
      CRASH: new SandboxCrashError('m').code,
      UNAVAILABLE: new SandboxUnavailableError('m').code,
    } as const;
    // Each entry's type is the literal of its key, and together they cover the whole table.
    expectTypeOf(codes).toEqualTypeOf<{ readonly [Code in SandboxErrorCode]: Code }>();
    expect(codes).toEqual(SandboxErrorCode);
  });
});
