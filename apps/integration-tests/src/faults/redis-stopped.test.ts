// Redis stops in the middle of a run (SIGKILL, as a crash) and comes back: guards follow their
// fail mode (closed: UNAVAILABLE; open: admitted), within their timeout, and nothing hangs —
// not the executions admitted before the stop, not those submitted while Redis is down.
import { once } from 'node:events';
import type { TerminalEvent } from '@coda/sandbox-core';
import { SandboxEngine } from '@coda/sandbox-isolate';
import {
  createLimitGuards,
  createRedisLimitStore,
  type FailMode,
  fromIoredis,
} from '@coda/sandbox-limits-redis';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { asError, asResult } from '../support/events.ts';
import { failFast, type RedisProcess, startRedis } from '../support/redis.ts';

const guardTimeoutMs = 300;
/** Any execution must end within this, Redis up or down. */
const hangBoundMs = 10_000;

let server: RedisProcess;
const clients: Redis[] = [];
const engines: Record<FailMode, SandboxEngine> = {} as never;

beforeAll(async () => {
  server = await startRedis();
  for (const failMode of ['closed', 'open'] as const) {
    // The closed engine's client queues commands while offline (ioredis's default), so only the
    // guard's timeout bounds the wait; the open engine's client fails fast by itself.
    const options = failMode === 'closed' ? { retryStrategy: () => 100 } : failFast;
    const client = new Redis({ host: '127.0.0.1', port: server.port, ...options });
    // Connection errors while Redis is down are expected; the guards report them.
    client.on('error', () => {});
    clients.push(client);
    await once(client, 'ready');
    engines[failMode] = new SandboxEngine({
      workers: 1,
      maxConcurrent: 16,
      guards: createLimitGuards({
        store: createRedisLimitStore({ client: fromIoredis(client), keyPrefix: `it:${failMode}:` }),
        failMode,
        timeoutMs: guardTimeoutMs,
        concurrency: { maxPerUser: 8, leaseTtlMs: 2_000 },
        rateLimit: { limit: 100_000, windowMs: 1_000 },
        turnBudget: { maxExecutionsPerTurn: 100_000 },
      }),
      // Executions that last a while, so some hold their leases when Redis stops.
      dataHandler: async () => {
        await new Promise((resolve) => setTimeout(resolve, 200));
        return 'slow';
      },
    });
    await engines[failMode].ready();
  }
});
afterAll(async () => {
  await Promise.all(Object.values(engines).map((engine) => engine.dispose()));
  for (const client of clients) client.disconnect();
  await server?.stop();
});

const context = () => ({ userId: 'u', conversationId: 'c', turnId: 't' });

async function timed(engine: SandboxEngine, code: string) {
  const started = performance.now();
  let timer: NodeJS.Timeout | undefined;
  const event = await Promise.race([
    engine.run({ code, context: context() }),
    new Promise<TerminalEvent>((_, reject) => {
      timer = setTimeout(() => reject(new Error('execution hung')), hangBoundMs);
    }),
  ]).finally(() => clearTimeout(timer));
  return { event, ms: performance.now() - started };
}

describe('Redis stopped mid-run', () => {
  it('closed refuses with UNAVAILABLE, open admits; in-flight executions finish; both recover', async () => {
    // Up: both admit.
    for (const engine of Object.values(engines)) {
      asResult((await timed(engine, 'return 1')).event);
    }
    // Executions in flight (holding concurrency leases) when Redis dies.
    const inFlight = Object.values(engines).flatMap((engine) =>
      Array.from({ length: 3 }, () => timed(engine, 'return await dataProxy.request(1)')),
    );
    await new Promise((resolve) => setTimeout(resolve, 100));
    await server.kill();

    for (const { event, ms } of await Promise.all(inFlight)) {
      // Admitted before the stop: they run to the end; releasing a lease cannot hold them up.
      expect(asResult(event).payload).toBe('slow');
      expect(ms).toBeLessThan(hangBoundMs);
    }

    // Down: a burst on each engine, each answered within the guard timeout plus slack.
    const closed = await Promise.all(
      Array.from({ length: 6 }, () => timed(engines.closed, 'return "ran"')),
    );
    for (const { event, ms } of closed) {
      expect(asError(event, 'UNAVAILABLE').details).toMatchObject({ failMode: 'closed' });
      expect(ms).toBeLessThan(guardTimeoutMs + 3_000);
    }
    const open = await Promise.all(
      Array.from({ length: 6 }, () => timed(engines.open, 'return "ran"')),
    );
    for (const { event, ms } of open) {
      expect(asResult(event).payload).toBe('ran');
      expect(ms).toBeLessThan(guardTimeoutMs * 3 + 3_000);
    }

    // Back (empty, scripts gone): the closed engine admits again once the client reconnects.
    await server.restart();
    const deadline = Date.now() + 15_000;
    for (;;) {
      const { event } = await timed(engines.closed, 'return "back"');
      if (event.type === 'result') break;
      expect(asError(event, 'UNAVAILABLE')).toBeDefined();
      if (Date.now() > deadline) throw new Error('the closed engine did not recover');
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    asResult((await timed(engines.open, 'return "back"')).event);
    for (const engine of Object.values(engines)) expect(engine.stats().active).toBe(0);
  }, 60_000);
});
