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
  type RateLimitLease,
} from '../src/index.ts';
import { failFast, type RedisProcess, startRedis } from './redis-servers.ts';
import { refusal } from './refusal.ts';
import { warningRecorder } from './warning-recorder.ts';

/**
 * Records the commands clients send to the server (MONITOR), leaving out those a script runs
 * inside Redis: what is left is one entry per round trip.
 */
async function recordRoundTrips(port: number) {
  const watcher = new Redis({ host: '127.0.0.1', port });
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
      const watcher = new Redis({ host: '127.0.0.1', port: server.port });
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
  it('insurance: enforces each limit on this host alone while Redis is down, then uses Redis again', async () => {
    const client = connect(failFast);
    await once(client, 'ready');
    const { warnings, logger } = warningRecorder();
    const store = createRedisLimitStore({
      client: fromIoredis(client),
      keyPrefix: `ins:${randomUUID()}:`,
    });
    const common = { store, timeoutMs: 300, failMode: 'insurance', logger } as const;
    const rate = createRateLimitGuard({ ...common, limit: 2, windowMs: 60_000 });
    const budget = createTurnBudgetGuard({ ...common, maxExecutionsPerTurn: 1 });
    const conc = createConcurrencyGuard({ ...common, maxPerUser: 1 });
    const context = (executionId: string) => ({ executionId, userId: 'u', turnId: 't' });
    // On Redis: one unit of two taken, the turn's one execution counted, decisions not insured.
    expect((await rate.acquire(context('a'))).decision).not.toHaveProperty('insured');
    expect((await budget.acquire(context('a'))).decision).not.toHaveProperty('insured');

    await server.kill();
    // This host's own counts start empty: two more rate units, one more execution of the turn.
    const insured = await rate.acquire(context('b'));
    expect(insured.decision).toMatchObject({ allowed: true, remaining: 1, insured: true });
    await rate.acquire(context('c'));
    const refused = await refusal(rate.acquire(context('d')));
    expect(refused.code).toBe('RATE_LIMITED');
    expect(refused.details).toMatchObject({ insured: true, cached: false });
    expect((await budget.acquire(context('b'))).decision).toMatchObject({ used: 1, insured: true });
    expect((await refusal(budget.acquire(context('c')))).details).toMatchObject({ insured: true });
    const slot = await conc.acquire(context('b'));
    expect(slot.insured).toBe(true);
    expect((await refusal(conc.acquire(context('c')))).details).toMatchObject({ insured: true });
    await slot.release();
    const again = await conc.acquire(context('d'));
    expect(again.insured).toBe(true);
    await again.release();
    expect(warnings.some((line) => line.includes('failMode insurance'))).toBe(true);

    // Redis back (empty, no persistence): decisions come from it again.
    await server.restart();
    const deadline = Date.now() + 10_000;
    for (;;) {
      // Until the client has reconnected, the insurance store answers (and refuses: 2 taken).
      const answer = await rate.acquire(context('e')).catch((error: unknown) => error);
      if (!isSandboxError(answer)) {
        expect((answer as RateLimitLease).decision).toEqual({
          allowed: true,
          remaining: 1,
          resetMs: expect.any(Number),
          retryAfterMs: 0,
        });
        break;
      }
      expect(answer.details).toMatchObject({ insured: true });
      if (Date.now() > deadline) throw new Error('still insured 10 s after Redis came back');
      await sleep(100);
    }
    const shared = await conc.acquire(context('f'));
    expect(shared.insured).toBe(false);
    await shared.release();
  });
});
