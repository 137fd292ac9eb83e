// A standalone Redis of its own, SIGKILLed and restarted empty (no persistence: every count and
// lease is forgotten) while three hosts run every limit, and made to flap (killed and restarted
// three times in two seconds). Five runs of each in a row, each checked against the bounds of
// docs/limits.md (see failover-scenario.ts).
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRedisLimitStore, fromIoredis } from '../src/index.ts';
import {
  type Entity,
  expectWithinBounds,
  insuredAdmissions,
  reportFigures,
  runScenario,
} from './failover-scenario.ts';
import { failFast, type RedisProcess, startRedis } from './redis-servers.ts';

const entities: Entity[] = Array.from({ length: 3 }, (_, i) => ({
  userId: `user${i}`,
  conversationId: `conv${i}`,
  turnId: `turn${i}`,
}));

describe('three hosts on a standalone Redis that fails', () => {
  let server: RedisProcess;
  const clients: Redis[] = [];
  beforeAll(async () => {
    server = await startRedis();
    for (let i = 0; i < 3; i++) {
      const client = new Redis({ host: '127.0.0.1', port: server.port, ...failFast });
      // Connection errors while the server is down are expected; the guards report them.
      client.on('error', () => {});
      clients.push(client);
    }
    await Promise.all(clients.map((client) => once(client, 'ready')));
  }, 30_000);
  afterAll(async () => {
    for (const client of clients) client.disconnect();
    await server?.stop();
  });

  /** A store per host, under a prefix of its own: each run starts from nothing. */
  const storesForRun = () => {
    const keyPrefix = `failover:${randomUUID()}:`;
    return clients.map((client) =>
      createRedisLimitStore({ client: fromIoredis(client), keyPrefix }),
    );
  };

  it.each([1, 2, 3, 4, 5])(
    'killed and restarted empty, run %i',
    async (run) => {
      const tally = await runScenario(storesForRun(), entities, async () => {
        await sleep(600);
        await server.kill();
        await sleep(800);
        await server.restart();
      });
      reportFigures(`standalone kill, run ${run}`, tally);
      expectWithinBounds(tally, 3);
      for (const kind of ['rate', 'budget', 'lease'] as const) {
        expect(insuredAdmissions(tally, kind), kind).toBeGreaterThan(0);
      }
    },
    40_000,
  );

  it.each([1, 2, 3, 4, 5])(
    'flapping, run %i',
    async (run) => {
      const tally = await runScenario(storesForRun(), entities, async () => {
        await sleep(400);
        for (let flap = 0; flap < 3; flap++) {
          await server.kill();
          await sleep(250);
          await server.restart();
          await sleep(300);
        }
      });
      reportFigures(`standalone flapping, run ${run}`, tally);
      expectWithinBounds(tally, 3);
      for (const kind of ['rate', 'budget', 'lease'] as const) {
        expect(insuredAdmissions(tally, kind), kind).toBeGreaterThan(0);
      }
    },
    40_000,
  );
});
