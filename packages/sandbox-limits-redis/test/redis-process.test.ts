// Tests that need a Redis of their own: counting round trips on a quiet server, a lease holder
// killed with SIGKILL, and the server itself stopped and restarted mid-test.
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { isSandboxError } from '@coda/sandbox-core';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createConcurrencyGuard,
  createRateLimitGuard,
  createRedisLimitStore,
  createTurnBudgetGuard,
  fromIoredis,
} from '../src/index.ts';
import { failFast, type RedisProcess, startRedis } from './redis-servers.ts';
import { refusal } from './refusal.ts';
import { warningRecorder } from './warning-recorder.ts';

/**
 * Records the commands clients send to the server (MONITOR), leaving out those a script runs
 * inside Redis: what is left is one entry per round trip.
 */
async function recordRoundTrips(port: number) {
  // No ready check: ioredis's INFO from the monitoring connection can come back as a MONITOR
  // line and throw "Command queue state error" (seen here once under load; bullmq#2505).
  const watcher = new Redis({ host: '127.0.0.1', port, enableReadyCheck: false });
  const monitor = await watcher.monitor();
  const commands: string[] = [];
  monitor.on('monitor', (_time: string, args: string[], source: string) => {
    if (source !== 'lua') commands.push(args[0]!.toLowerCase());
  });
  return {
    /** Waits for MONITOR to catch up, then stops it and returns what it saw. */
    async stop(): Promise<string[]> {
      await sleep(100);
      monitor.disconnect();
      watcher.disconnect();
      return commands;
    },
  };
}

describe('on a server of its own', () => {
  let server: RedisProcess;
  let client: Redis;
  beforeAll(async () => {
    server = await startRedis();
    client = new Redis({ host: '127.0.0.1', port: server.port });
    await once(client, 'ready');
  });
  afterAll(async () => {
    await client?.quit();
    await server?.stop();
  });

  it('makes exactly one round trip per check once the script is cached', async () => {
    const store = createRedisLimitStore({ client: fromIoredis(client) });
    const guard = createRateLimitGuard({
      store,
      limit: 1_000,
      windowMs: 60_000,
      timeoutMs: 10_000,
    });
    let recording = await recordRoundTrips(server.port);
    await guard.acquire({ executionId: 'first', userId: 'u' });
    // The first call finds no script: one EVALSHA answered NOSCRIPT, then one EVAL.
    expect(await recording.stop()).toEqual(['evalsha', 'eval']);

    recording = await recordRoundTrips(server.port);
    await Promise.all(
      Array.from({ length: 100 }, (_, i) => guard.acquire({ executionId: `${i}`, userId: 'u' })),
    );
    expect(await recording.stop()).toEqual(Array(100).fill('evalsha'));
  });

  it('reads TIME in its scripts with clock redis, and never with clock host', async () => {
    const timeCalls = async (clock: 'redis' | 'host') => {
      const store = createRedisLimitStore({
        client: fromIoredis(client),
        keyPrefix: `${clock}:`,
        clock,
      });
      const rule = { limit: 5, windowMs: 60_000, burst: 5 };
      await store.rateLimit('{=warm}', rule); // scripts cached first
      await store.acquireLease('{=warm-lease}', 'm', 1, 60_000);
      const watcher = new Redis({ host: '127.0.0.1', port: server.port, enableReadyCheck: false });
      const monitor = await watcher.monitor();
      const inScripts: string[] = [];
      monitor.on('monitor', (_time: string, args: string[], source: string) => {
        if (source === 'lua') inScripts.push(args[0]!.toLowerCase());
      });
      await store.rateLimit('{=u}', rule);
      await store.refundRate('{=u}', rule);
      await store.acquireLease('{=u-lease}', 'm', 1, 60_000);
      await sleep(100);
      monitor.disconnect();
      watcher.disconnect();
      return inScripts.filter((command) => command === 'time').length;
    };
    expect(await timeCalls('redis')).toBe(3);
    expect(await timeCalls('host')).toBe(0);
  });

  it('writes the checks of one tick in a few writes, each settling with its own reply', async () => {
    const sha = (await client.script('LOAD', 'return ARGV[1] + 0')) as string;
    const adapted = fromIoredis(client);
    const before = await client.info('stats');
    const calls = [
      ...Array.from({ length: 50 }, (_, i) => adapted.evalsha(sha, [], [String(i)])),
      adapted.evalsha('0'.repeat(40), [], []),
    ];
    // Corked for the rest of this tick, uncorked right after it.
    expect(client.stream.writableCorked).toBe(1);
    const results = await Promise.allSettled(calls);
    expect(client.stream.writableCorked).toBe(0);
    expect(results.slice(0, 50)).toEqual(
      Array.from({ length: 50 }, (_, i) => ({ status: 'fulfilled', value: i })),
    );
    expect(results[50]).toMatchObject({ status: 'rejected' });
    expect(String((results[50] as PromiseRejectedResult).reason)).toContain('NOSCRIPT');
    // One write per 16 commands and one at the end of the tick: 4 writes for 51 commands, so the
    // server read them in at most 4 reads (fewer if they arrived together), plus INFO's own.
    const reads = (info: string) => Number(/total_reads_processed:(\d+)/.exec(info)?.[1]);
    const after = await client.info('stats');
    expect(reads(after) - reads(before)).toBeLessThanOrEqual(5);
  });

  it('gives back the slot of a host killed with SIGKILL after the lease TTL', async () => {
    const keyPrefix = `crash:${randomUUID()}:`;
    const fixture = join(import.meta.dirname, 'fixtures', 'hold-lease.ts');
    const child = spawn(
      process.execPath,
      ['--conditions=@coda/source', fixture, String(server.port), keyPrefix, 'conc', 'u1', '500'],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
    const [chunk] = (await once(child.stdout!, 'data')) as [Buffer];
    expect(chunk.toString()).toBe('held\n');
    const heldAt = Date.now();
    child.kill('SIGKILL');
    await once(child, 'exit');

    const store = createRedisLimitStore({ client: fromIoredis(client), keyPrefix });
    const guard = createConcurrencyGuard({ store, name: 'conc', maxPerUser: 1, timeoutMs: 10_000 });
    const error = await refusal(guard.acquire({ executionId: 'e', userId: 'u1' }));
    expect(error.code).toBe('RATE_LIMITED');
    expect(error.details?.retryAfterMs).toBeLessThanOrEqual(500);
    await sleep(Math.max(0, 500 - (Date.now() - heldAt)) + 50);
    const lease = await guard.acquire({ executionId: 'e', userId: 'u1' });
    await lease.release();
  });
});

describe('when Redis stops mid-test and comes back', () => {
  let server: RedisProcess;
  const clients: Redis[] = [];
  beforeAll(async () => {
    server = await startRedis();
  });
  afterAll(async () => {
    for (const client of clients) client.disconnect();
    await server?.stop();
  });

  function connect(options: object) {
    const client = new Redis({ host: '127.0.0.1', port: server.port, ...options });
    // Connection errors while the server is down are expected; the guards report them.
    client.on('error', () => {});
    clients.push(client);
    return client;
  }

  it('refuses with UNAVAILABLE (closed) or admits and logs (open), within the timeout, then recovers', async () => {
    // One client fails fast by itself; the other queues commands while offline (ioredis's
    // default), so only the guard's timeout stops the wait.
    const fast = connect(failFast);
    const queueing = connect({ retryStrategy: () => 100 });
    await Promise.all([once(fast, 'ready'), once(queueing, 'ready')]);
    const { warnings, logger } = warningRecorder();
    const guardsOn = (client: Redis) => {
      const store = createRedisLimitStore({ client: fromIoredis(client) });
      const common = { store, timeoutMs: 300 };
      return {
        rate: createRateLimitGuard({ ...common, limit: 1_000, windowMs: 1_000 }),
        budget: createTurnBudgetGuard({ ...common, maxExecutionsPerTurn: 1_000 }),
        conc: createConcurrencyGuard({ ...common, maxPerUser: 1_000 }),
        open: createRateLimitGuard({
          ...common,
          name: 'open',
          limit: 1_000,
          windowMs: 1_000,
          failMode: 'open',
          logger,
        }),
      };
    };
    const all = [guardsOn(fast), guardsOn(queueing)];
    const context = { executionId: 'e', userId: 'u', turnId: 't' };
    for (const guards of all) {
      for (const guard of Object.values(guards)) await guard.acquire(context);
    }

    await server.kill();
    for (const guards of all) {
      for (const guard of [guards.rate, guards.budget, guards.conc]) {
        const started = Date.now();
        const error = await refusal(guard.acquire(context));
        expect(error.code).toBe('UNAVAILABLE');
        expect(error.details).toEqual({ guard: guard.name, failMode: 'closed' });
        expect(Date.now() - started).toBeLessThan(2_000);
      }
      const started = Date.now();
      const lease = await guards.open.acquire(context);
      expect(lease.decision).toBeUndefined();
      expect(Date.now() - started).toBeLessThan(2_000);
    }
    expect(warnings.length).toBeGreaterThanOrEqual(2);
    expect(warnings[0]).toContain('going on without this limit');

    // Back, empty (no persistence): scripts are gone too, and NOSCRIPT is recovered from.
    await server.restart();
    const deadline = Date.now() + 10_000;
    for (const guards of all) {
      for (const guard of Object.values(guards)) {
        for (;;) {
          const lease = await guard.acquire(context).catch((error: unknown) => error);
          if (!isSandboxError(lease)) {
            if ('decision' in (lease as object)) {
              expect((lease as { decision: unknown }).decision).toBeDefined();
            }
            break;
          }
          expect(lease.code).toBe('UNAVAILABLE');
          if (Date.now() > deadline) throw lease;
          await sleep(100);
        }
      }
    }
  });
  it('insurance: enforces each limit on this host alone, knowing what it holds on Redis, then uses Redis again', async () => {
    const client = connect(failFast);
    await once(client, 'ready');
    const { warnings, logger } = warningRecorder();
    const keyPrefix = `ins:${randomUUID()}:`;
    const store = createRedisLimitStore({ client: fromIoredis(client), keyPrefix });
    const common = { store, timeoutMs: 300, failMode: 'insurance', logger } as const;
    const rate = createRateLimitGuard({ ...common, limit: 2, windowMs: 60_000 });
    const budget = createTurnBudgetGuard({ ...common, maxExecutionsPerTurn: 1 });
    const conc = createConcurrencyGuard({
      ...common,
      maxPerUser: 2,
      leaseTtlMs: 5_000,
      renewEveryMs: 100,
    });
    const context = (executionId: string, userId = 'u') => ({ executionId, userId, turnId: 't' });
    // On Redis: one unit of two taken, the turn's one execution counted, one slot of two held.
    expect((await rate.acquire(context('a'))).decision).not.toHaveProperty('insured');
    expect((await budget.acquire(context('a'))).decision).not.toHaveProperty('insured');
    const onRedis = await conc.acquire(context('a'));
    expect(onRedis.insured).toBe(false);

    await server.kill();
    // The insurance store knows what this host took on Redis: one more rate unit, no more
    // executions of the turn (its retry is still admitted), one more slot.
    const insured = await rate.acquire(context('b'));
    expect(insured.decision).toMatchObject({ allowed: true, remaining: 0, insured: true });
    const refused = await refusal(rate.acquire(context('c')));
    expect(refused.code).toBe('RATE_LIMITED');
    expect(refused.details).toMatchObject({ insured: true, cached: false });
    const spent = await refusal(budget.acquire(context('b')));
    expect(spent.code).toBe('BUDGET_EXHAUSTED');
    expect(spent.details).toMatchObject({ insured: true, used: 1 });
    expect((await budget.acquire(context('a'))).decision).toMatchObject({
      alreadyCounted: true,
      insured: true,
    });
    const slot = await conc.acquire(context('b'));
    expect(slot.insured).toBe(true);
    const full = await refusal(conc.acquire(context('c')));
    expect(full.details).toMatchObject({ insured: true, held: 2 });
    expect(warnings.some((line) => line.includes('failMode insurance'))).toBe(true);

    // Redis back (empty, no persistence). The insured slot is written back at its next renewal:
    // another host then sees it (and the re-taken one: the cap is full there too).
    await server.restart();
    const otherHost = connect(failFast);
    await once(otherHost, 'ready');
    const elsewhere = createConcurrencyGuard({
      store: createRedisLimitStore({ client: fromIoredis(otherHost), keyPrefix }),
      maxPerUser: 2,
    });
    const deadline = Date.now() + 10_000;
    for (;;) {
      const answer = await elsewhere.acquire(context('x')).catch((error: unknown) => error);
      if (isSandboxError(answer) && answer.code === 'RATE_LIMITED') {
        expect(answer.details).toMatchObject({ held: 2 });
        break;
      }
      if (!isSandboxError(answer)) await (answer as { release(): Promise<void> }).release();
      if (Date.now() > deadline)
        throw new Error('insured slot not written back 10 s after Redis came back');
      await sleep(100);
    }
    // Redis has forgotten this host's rate unit and the turn's execution; this host has not.
    const overHere = await refusal(rate.acquire(context('d')));
    expect(overHere.details).toMatchObject({ thisHost: true });
    expect((await refusal(budget.acquire(context('e')))).details).toMatchObject({ thisHost: true });
    // Another user's checks come from Redis again.
    const fresh = await rate.acquire(context('f', 'u2'));
    expect(fresh.decision).toEqual({
      allowed: true,
      remaining: 1,
      resetMs: expect.any(Number),
      retryAfterMs: 0,
    });
    await Promise.all([onRedis.release(), slot.release()]);
    const shared = await conc.acquire(context('g'));
    expect(shared.insured).toBe(false);
    await shared.release();
  });
});
