export {
  type ConcurrencyGuard,
  type ConcurrencyGuardOptions,
  type ConcurrencyLease,
  createConcurrencyGuard,
} from './guards/concurrency-guard.ts';
export type { FailMode, GuardOptions } from './guards/guard-options.ts';
export {
  createLimitGuards,
  type LimitGuardsOptions,
  type LimitSection,
  type LimitsGuard,
  type LimitsLease,
} from './guards/limit-guards.ts';
export {
  createRateLimitGuard,
  type RateLimitGuard,
  type RateLimitGuardOptions,
  type RateLimitLease,
} from './guards/rate-limit-guard.ts';
export {
  createTurnBudgetGuard,
  type TurnBudgetGuard,
  type TurnBudgetGuardOptions,
  type TurnBudgetLease,
} from './guards/turn-budget-guard.ts';
export type { CorkableStream } from './redis/coalesced-writes.ts';
export { createRedisLimitStore, type RedisLimitStoreOptions } from './redis/redis-store.ts';
export {
  fromIoredis,
  fromNodeRedis,
  type IoredisLike,
  type NodeRedisLike,
  type RedisScriptClient,
} from './redis/script-client.ts';
export type { Clock } from './redis/scripts.ts';
export type {
  BudgetDecision,
  LeaseDecision,
  LimitStore,
  RateLimitDecision,
  RateRule,
} from './store/limit-store.ts';
export { createMemoryLimitStore, type MemoryLimitStoreOptions } from './store/memory-store.ts';
