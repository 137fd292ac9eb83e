// The Redis backend: every operation is one script on one key, called by SHA (one round trip),
// with a fallback to EVAL when the node answers NOSCRIPT (restart, failover, SCRIPT FLUSH).
import { type Logger, silentLogger, validate } from '@coda/sandbox-core';
import { z } from 'zod';
import { hostWallNow } from '../clock/host-clock.ts';
import { checkedClock, withClockFallback as marked } from '../clock/time-check.ts';
import { loggerSchema } from '../guards/guard-options.ts';
import type {
  BudgetDecision,
  LeaseDecision,
  LimitStore,
  RateLimitDecision,
  RateRule,
} from '../store/limit-store.ts';
import { checkLimitAndTtl, checkRule } from '../store/store-arguments.ts';
import type { RedisScriptClient } from './script-client.ts';
import { type Clock, type LuaScript, scripts } from './scripts.ts';

/** Options of {@link createRedisLimitStore}. */
export interface RedisLimitStoreOptions {
  /** Your client, adapted: `fromIoredis(redis)` or `fromNodeRedis(client)`. Never closed here. */
  client: RedisScriptClient;
  /**
   * Prefix of every key, default `coda:limits:`. No braces (the hash tag must be the entity's),
   * at most 256 characters.
   */
  keyPrefix?: string | undefined;
  /**
   * Whose clock times the limits: `redis` (default) reads `TIME` inside each script, so every
   * host agrees whatever its own clock says; `host` sends this host's wall clock with each call,
   * for services that refuse `TIME` in scripts. With `host`, a host whose clock runs ahead or
   * behind shifts the rate limits and leases it checks by that much (see docs/limits.md). The
   * host's clock is `Date.now` as it was when this package loaded (code that replaces it later
   * changes nothing), and a reading more than 10 years from this process's monotonic clock is not
   * sent: that call reads Redis `TIME` instead, logs once, and answers `clockFallback: true`.
   */
  clock?: Clock | undefined;
  /** Where the one warning about a refused host clock reading goes. Default: nothing is logged. */
  logger?: Logger | undefined;
}

/** Validates {@link RedisLimitStoreOptions}. */
export const RedisLimitStoreOptionsSchema = z.strictObject({
  client: z.custom<RedisScriptClient>(
    (value) =>
      typeof value === 'object' &&
      value !== null &&
      typeof (value as RedisScriptClient).evalsha === 'function' &&
      typeof (value as RedisScriptClient).eval === 'function',
    'expected a RedisScriptClient: wrap your client with fromIoredis() or fromNodeRedis()',
  ),
  keyPrefix: z
    .string()
    .max(256)
    .regex(/^[^{}]*$/, 'must not contain { or }')
    .default('coda:limits:'),
  clock: z.enum(['redis', 'host']).default('redis'),
  logger: loggerSchema.optional(),
});

/**
 * A {@link LimitStore} on Redis or Redis Cluster, shared by every host that uses the same server
 * and prefix. Times come from the server's clock (or the host's, with `clock: 'host'`); every key
 * it writes has a TTL.
 */
export function createRedisLimitStore(options: RedisLimitStoreOptions): LimitStore {
  return redisLimitStore(options, hostWallNow);
}

/**
 * {@link createRedisLimitStore}, with `clock: 'host'` reading `hostClock` (tests give it a skewed
 * or broken clock; nothing outside this package can).
 */
export function redisLimitStore(
  options: RedisLimitStoreOptions,
  hostClock: () => unknown,
): LimitStore {
  const { client, keyPrefix, clock, logger } = validate(
    RedisLimitStoreOptionsSchema,
    options,
    'Redis limit store options',
  );

  const hostTime =
    clock === 'host'
      ? checkedClock(hostClock, 'this host’s clock', logger ?? silentLogger)
      : undefined;
  /**
   * The variant of a timed script to run and its arguments: with the host's clock, its reading as
   * the last argument, or, when that reading was refused, the Redis-clock variant (`fellBack`).
   */
  function timed(name: TimedScript, args: readonly string[]) {
    const now = hostTime?.();
    if (now === undefined) {
      return { lua: scripts.redis[name], args, fellBack: hostTime !== undefined };
    }
    return { lua: scripts.host[name], args: [...args, String(now)], fellBack: false };
  }

  // Promise chains rather than async functions: this is the hot path, one layer less per check.
  function run(lua: LuaScript, key: string, args: readonly string[]): Promise<number[]> {
    return runDecoded(lua, key, args, (reply) => toNumbers(reply, lua.name));
  }

  /** Runs `lua` and turns its reply into the answer in the same step (one promise layer less). */
  function runDecoded<Answer>(
    lua: LuaScript,
    key: string,
    args: readonly string[],
    decode: (reply: unknown) => Answer,
  ): Promise<Answer> {
    const keys = [keyPrefix + key];
    return client.evalsha(lua.sha, keys, args).then(decode, (error: unknown) => {
      if (!isNoScript(error)) throw error;
      // This node lost (or never had) the script: EVAL runs it and caches it there.
      return client.eval(lua.source, keys, args).then(decode);
    });
  }

  return {
    kind: 'redis',
    rateLimit(key: string, rule: RateRule): Promise<RateLimitDecision> {
      try {
        checkRule(rule);
      } catch (error) {
        return Promise.reject(error);
      }
      const { lua, args, fellBack } = timed('rateLimit', ruleArguments(rule));
      return runDecoded(lua, key, args, (reply) =>
        marked(decodeRate(toMicros(reply), rule), fellBack),
      );
    },
    async refundRate(key: string, rule: RateRule, unitLeftMs?: number): Promise<void> {
      checkRule(rule);
      const ruleArgs = ruleArguments(rule);
      const { lua, args } = timed(
        'refundRate',
        unitLeftMs === undefined ? ruleArgs : [...ruleArgs, String(unitLeftMs)],
      );
      await run(lua, key, args);
    },
    async claimBudget(key, member, limit, ttlMs): Promise<BudgetDecision> {
      checkLimitAndTtl(limit, ttlMs);
      const [allowed, used, resetMs, already] = await run(scripts.redis.turnBudget, key, [
        member,
        String(limit),
        String(ttlMs),
      ]);
      return {
        allowed: allowed === 1,
        used: used ?? 0,
        resetMs: resetMs ?? 0,
        alreadyCounted: already === 1,
      };
    },
    async acquireLease(key, member, limit, ttlMs): Promise<LeaseDecision> {
      checkLimitAndTtl(limit, ttlMs);
      const timedCall = timed('acquireLease', [member, String(limit), String(ttlMs)]);
      const [allowed, held, retryAfterMs] = await run(timedCall.lua, key, timedCall.args);
      const decision = { allowed: allowed === 1, held: held ?? 0, retryAfterMs: retryAfterMs ?? 0 };
      return marked(decision, timedCall.fellBack);
    },
    async releaseLease(key, member): Promise<void> {
      await run(scripts.redis.releaseLease, key, [member]);
    },
  };
}

/** The scripts that read the time, in both clock variants. */
type TimedScript = 'rateLimit' | 'refundRate' | 'acquireLease';

/**
 * Turns the rate script's one integer back into a decision, with the arithmetic of the memory
 * store. `micros` is rounded to the microsecond, so `remaining` gets half a microsecond of slack.
 */
function decodeRate(micros: number, rule: RateRule): RateLimitDecision {
  const interval = rule.windowMs / rule.limit;
  const tolerance = interval * rule.burst;
  if (micros > 0) {
    const untilTat = micros / 1_000;
    const remaining = Math.floor((tolerance - untilTat + 0.0005) / interval + 1e-9);
    return {
      allowed: true,
      remaining: Math.min(rule.burst - 1, Math.max(0, remaining)),
      resetMs: Math.max(1, Math.ceil(untilTat)),
      retryAfterMs: 0,
    };
  }
  const untilTat = -micros / 1_000;
  return {
    allowed: false,
    remaining: 0,
    resetMs: Math.ceil(untilTat),
    retryAfterMs: Math.max(1, Math.ceil(untilTat + interval - tolerance)),
  };
}

// A guard passes the same rule object on every check: turn it into script arguments once.
const ruleArgumentCache = new WeakMap<RateRule, readonly string[]>();
function ruleArguments(rule: RateRule): readonly string[] {
  let args = ruleArgumentCache.get(rule);
  if (args === undefined) {
    args = [String(rule.limit), String(rule.windowMs), String(rule.burst)];
    ruleArgumentCache.set(rule, args);
  }
  return args;
}

function isNoScript(error: unknown): boolean {
  const message = error instanceof Error ? error.message : String(error);
  return message.startsWith('NOSCRIPT') || message.includes('NOSCRIPT');
}

/** The rate script's one integer (a number from ioredis, maybe a string from other clients). */
function toMicros(reply: unknown): number {
  const micros = typeof reply === 'number' ? reply : Number(reply);
  if (!Number.isFinite(micros)) throw new Error('Script rate-limit returned a non-number');
  return micros;
}

function toNumbers(reply: unknown, name: string): number[] {
  if (typeof reply === 'number') return [reply];
  if (!Array.isArray(reply)) throw new Error(`Script ${name} returned an unexpected reply`);
  return reply.map((value) => {
    const number = Number(value);
    if (!Number.isFinite(number)) throw new Error(`Script ${name} returned a non-number`);
    return number;
  });
}
