// The documented option types and the zod schemas that validate them must describe the same
// objects: a field added to one and not the other fails the package's typecheck (`tsc`, part of
// `pnpm test`). Each interface is what a caller passes (the schema's input); the schema's output
// has every default filled in, so it must name the same fields.
import { describe, expectTypeOf, it } from 'vitest';
import type { z } from 'zod';
import type {
  ConcurrencyGuardOptions,
  ConcurrencyGuardOptionsSchema,
} from './guards/concurrency-guard.ts';
import type { GuardOptions } from './guards/guard-options.ts';
import type { LimitGuardsOptions, LimitGuardsShape } from './guards/limit-guards.ts';
import type {
  RateLimitGuardOptions,
  RateLimitGuardOptionsSchema,
} from './guards/rate-limit-guard.ts';
import type {
  TurnBudgetGuardOptions,
  TurnBudgetGuardOptionsSchema,
} from './guards/turn-budget-guard.ts';
import type { RedisLimitStoreOptions, RedisLimitStoreOptionsSchema } from './redis/redis-store.ts';
import type {
  MemoryLimitStoreOptions,
  MemoryLimitStoreOptionsSchema,
} from './store/memory-store.ts';

describe('option types and their schemas', () => {
  it('agree field for field with what the schema accepts, and name what it returns', () => {
    type Concurrency = typeof ConcurrencyGuardOptionsSchema;
    expectTypeOf<ConcurrencyGuardOptions>().toEqualTypeOf<z.input<Concurrency>>();
    expectTypeOf<keyof ConcurrencyGuardOptions>().toEqualTypeOf<keyof z.output<Concurrency>>();
    type Rate = typeof RateLimitGuardOptionsSchema;
    expectTypeOf<RateLimitGuardOptions>().toEqualTypeOf<z.input<Rate>>();
    expectTypeOf<keyof RateLimitGuardOptions>().toEqualTypeOf<keyof z.output<Rate>>();
    type Budget = typeof TurnBudgetGuardOptionsSchema;
    expectTypeOf<TurnBudgetGuardOptions>().toEqualTypeOf<z.input<Budget>>();
    expectTypeOf<keyof TurnBudgetGuardOptions>().toEqualTypeOf<keyof z.output<Budget>>();
    type Redis = typeof RedisLimitStoreOptionsSchema;
    expectTypeOf<RedisLimitStoreOptions>().toEqualTypeOf<z.input<Redis>>();
    expectTypeOf<keyof RedisLimitStoreOptions>().toEqualTypeOf<keyof z.output<Redis>>();
    type Memory = typeof MemoryLimitStoreOptionsSchema;
    expectTypeOf<MemoryLimitStoreOptions>().toEqualTypeOf<z.input<Memory>>();
    expectTypeOf<MemoryLimitStoreOptions>().toEqualTypeOf<z.output<Memory>>();
  });

  it('createLimitGuards takes the same sections its schema reads', () => {
    // Each section is checked by its own guard's schema; the shared options by every guard's.
    type Sections = Exclude<keyof (typeof LimitGuardsShape)['shape'], 'store'>;
    expectTypeOf<Exclude<keyof LimitGuardsOptions, keyof GuardOptions>>().toEqualTypeOf<Sections>();
  });
});
