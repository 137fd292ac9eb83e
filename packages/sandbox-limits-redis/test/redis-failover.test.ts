// A 3-primary, 3-replica cluster of its own (`cluster-node-timeout` 1 s); the primary that owns
// every entity's keys is SIGKILLed while three hosts run every limit, its replica takes over, and
// the killed node comes back as the new replica before the next run: five failovers in a row,
// each run checked against the bounds of docs/limits.md (see failover-scenario.ts). Each promoted
// replica had no scripts: it answers NOSCRIPT and the store sends EVAL.
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { Cluster } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRedisLimitStore, fromIoredis } from '../src/index.ts';
import {
  clusterNodes,
  clusterSettled,
  keySlot,
  linkedReplicaOf,
  primaryOf,
  statField,
} from './cluster-nodes.ts';
import {
  type Entity,
  expectWithinBounds,
  insuredAdmissions,
  reportFigures,
  runScenario,
} from './failover-scenario.ts';
import { type RedisCluster, redisCli, startRedisCluster } from './redis-servers.ts';

describe('three hosts on a cluster whose primary fails over', () => {
  let cluster: RedisCluster;
  const clients: Cluster[] = [];
  const entities: Entity[] = [];
  /** The slot range of the victim pair: every entity's keys live there. */
  let victimSlot = 0;

  beforeAll(async () => {
    cluster = await startRedisCluster(3, { replicas: 1, nodeTimeoutMs: 1_000 });
    await clusterSettled(cluster.ports);
    const port = cluster.ports[0]!;
    victimSlot = await keySlot(port, '{=user0}');
    const victim = await primaryOf(port, victimSlot);
    const onVictim = async (tag: string) =>
      (await primaryOf(port, await keySlot(port, `{${tag}}`))).id === victim.id;
    // Entities whose user key and turn key both live on the victim's slots.
    for (let i = 0; entities.length < 3 && i < 1_000; i++) {
      const userId = `user${i}`;
      if (!(await onVictim(`=${userId}`))) continue;
      for (let j = 0; j < 1_000; j++) {
        const [conversationId, turnId] = [`conv${i}`, `turn${j}`];
        if (await onVictim(`=${conversationId}|=${turnId}`)) {
          entities.push({ userId, conversationId, turnId });
          break;
        }
      }
    }
    expect(entities).toHaveLength(3);
    for (let i = 0; i < 3; i++) {
      const client = new Cluster(
        cluster.ports.map((each) => ({ host: '127.0.0.1', port: each })),
        {
          enableOfflineQueue: false,
          slotsRefreshInterval: 500,
          retryDelayOnFailover: 100,
          redisOptions: { maxRetriesPerRequest: 1, connectTimeout: 500 },
        },
      );
      // Connection errors to the killed node are expected; the guards report them.
      client.on('error', () => {});
      clients.push(client);
    }
    await Promise.all(
      clients.map(
        (client) => new Promise<void>((resolve) => client.once('ready', () => resolve())),
      ),
    );
  }, 90_000);
  afterAll(async () => {
    for (const client of clients) client.disconnect();
    await cluster?.stop();
  });

  it.each([1, 2, 3, 4, 5])(
    'primary killed, replica promoted, run %i',
    async (run) => {
      // Any node that is up sees the cluster: the one killed last run is back by now.
      const victim = await primaryOf(cluster.ports[0]!, victimSlot);
      const replica = await linkedReplicaOf(victim);
      const victimProcess = cluster.nodes[cluster.ports.indexOf(victim.port)]!;
      const keyPrefix = `failover:${randomUUID()}:`;
      const stores = clients.map((client) =>
        createRedisLimitStore({ client: fromIoredis(client), keyPrefix }),
      );

      try {
        const tally = await runScenario(stores, entities, async () => {
          await sleep(600);
          await victimProcess.kill();
        });
        reportFigures(`cluster failover, run ${run}`, tally);
        expectWithinBounds(tally, 3);
        for (const kind of ['rate', 'budget', 'lease'] as const) {
          expect(insuredAdmissions(tally, kind), kind).toBeGreaterThan(0);
        }

        // The replica took over, without the scripts: NOSCRIPT, then EVAL ran them there.
        const promoted = (await clusterNodes(replica.port)).find((node) => node.id === replica.id);
        expect(promoted?.primary).toBe(true);
        const errors = await redisCli(replica.port, 'INFO', 'errorstats');
        const commands = await redisCli(replica.port, 'INFO', 'commandstats');
        expect(statField(errors, 'errorstat_NOSCRIPT')).toBeGreaterThan(0);
        expect(statField(commands, 'cmdstat_eval')).toBeGreaterThan(0);
      } finally {
        // The killed node comes back as the new replica (it keeps its nodes.conf), for the next run.
        await victimProcess.restart();
        await clusterSettled(cluster.ports);
      }
    },
    60_000,
  );
});
