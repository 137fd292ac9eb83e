// A 3-primary, 3-replica cluster of its own; one primary is SIGKILLed while two "hosts" run rate
// limits against it. Host A fails over to its insurance store, host B fails closed. The test checks
// what each host answers during the failover, that both recover by themselves (the promoted
// replica has no scripts: NOSCRIPT, then EVAL), and that admissions stay within the bound that
// docs/limits.md states: (1 + failovers + insured hosts) × (burst + ⌈T × limit / windowMs⌉).
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { isSandboxError } from '@coda/sandbox-core';
import { Cluster } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createRateLimitGuard,
  createRedisLimitStore,
  fromIoredis,
  type RateLimitGuard,
} from '../src/index.ts';
import { type RedisCluster, redisCli, startRedisCluster } from './redis-servers.ts';

/** One line of CLUSTER NODES: who a node is, whom it replicates, which slots it serves. */
interface ClusterNode {
  id: string;
  port: number;
  primary: boolean;
  primaryId: string;
  slots: [number, number][];
}

async function clusterNodes(port: number): Promise<ClusterNode[]> {
  const lines = (await redisCli(port, 'CLUSTER', 'NODES')).split('\n').filter(Boolean);
  return lines.map((line) => {
    const [id, address, flags, primaryId, , , , , ...slots] = line.split(' ');
    return {
      id: id!,
      port: Number(address!.split('@')[0]!.split(':')[1]),
      primary: flags!.includes('master'),
      primaryId: primaryId!,
      slots: slots
        .filter((range) => !range.startsWith('['))
        .map((range) => {
          const [from, to] = range.split('-').map(Number);
          return [from!, to ?? from!] as [number, number];
        }),
    };
  });
}

/** Waits until every replica's link to its primary is up, so writes replicate from the start. */
async function replicasInSync(ports: number[]): Promise<void> {
  const deadline = Date.now() + 20_000;
  for (const port of ports) {
    for (;;) {
      const info = await redisCli(port, 'INFO', 'replication');
      if (info.includes('role:master') || info.includes('master_link_status:up')) break;
      if (Date.now() > deadline) throw new Error(`replica ${port} not in sync: ${info}`);
      await sleep(100);
    }
  }
}

/** What one check answered, as the test counts it. */
type Outcome = 'admitted' | 'admitted-insured' | 'refused' | 'refused-insured' | 'unavailable';

async function check(guard: RateLimitGuard, userId: string): Promise<Outcome> {
  try {
    const lease = await guard.acquire({ executionId: randomUUID(), userId });
    return lease.decision?.insured === true ? 'admitted-insured' : 'admitted';
  } catch (error) {
    if (!isSandboxError(error)) throw error;
    if (error.code === 'UNAVAILABLE') return 'unavailable';
    if (error.code !== 'RATE_LIMITED') throw error;
    return error.details?.insured === true ? 'refused-insured' : 'refused';
  }
}

const statField = (info: string, field: string) =>
  Number(new RegExp(`${field}:(?:\\w+=)?(\\d+)`).exec(info)?.[1] ?? 0);

describe('a cluster primary killed while guards run', () => {
  let cluster: RedisCluster;
  const clients: Cluster[] = [];
  beforeAll(async () => {
    // A replica takes over once its primary has been unreachable for a second.
    cluster = await startRedisCluster(3, { replicas: 1, nodeTimeoutMs: 1_000 });
    await replicasInSync(cluster.ports);
  }, 60_000);
  afterAll(async () => {
    for (const client of clients) client.disconnect();
    await cluster?.stop();
  });

  it('fails over to insurance (A) or closed (B), recovers, and admits within the bound', async () => {
    const connect = () => {
      const client = new Cluster(
        cluster.ports.map((port) => ({ host: '127.0.0.1', port })),
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
      return client;
    };
    const [clientA, clientB] = [connect(), connect()];
    await Promise.all(
      [clientA, clientB].map(
        (client) => new Promise<void>((resolve) => client.once('ready', () => resolve())),
      ),
    );
    const keyPrefix = `failover:${randomUUID()}:`;
    const storeA = createRedisLimitStore({ client: fromIoredis(clientA), keyPrefix });
    const storeB = createRedisLimitStore({ client: fromIoredis(clientB), keyPrefix });
    const rule = { limit: 5, windowMs: 600_000 } as const;
    const common = { ...rule, timeoutMs: 500 } as const;
    // A: insurance, without the refusal cache so that its checks reach the store during the
    // failover; B: closed, with the cache (its cached refusals go on through the failover).
    const guardA = createRateLimitGuard({
      ...common,
      store: storeA,
      failMode: 'insurance',
      refusalCache: 0,
    });
    const guardB = createRateLimitGuard({ ...common, store: storeB });
    // Probes with a limit nobody reaches: each of their checks goes to the store.
    const probeLimit = { limit: 1_000_000, windowMs: 600_000, timeoutMs: 500, name: 'probe' };
    const probeA = createRateLimitGuard({ ...probeLimit, store: storeA, failMode: 'insurance' });
    const probeB = createRateLimitGuard({ ...probeLimit, store: storeB });

    const users = Array.from({ length: 24 }, (_, i) => `u${i}`);
    const before = await clusterNodes(cluster.ports[0]!);
    const slotOf = async (user: string) =>
      Number(await redisCli(cluster.ports[0]!, 'CLUSTER', 'KEYSLOT', `{=${user}}`));
    const owner = (slot: number) =>
      before.find(
        (node) => node.primary && node.slots.some(([from, to]) => slot >= from && slot <= to),
      )!;
    const victim = owner(await slotOf(users[0]!));
    const promoted = before.find((node) => node.primaryId === victim.id)!;
    const onVictim = new Set<string>();
    for (const user of users) if (owner(await slotOf(user)).id === victim.id) onVictim.add(user);
    expect(onVictim.size).toBeGreaterThan(0);
    expect(onVictim.size).toBeLessThan(users.length);

    const tally = {
      A: new Map(users.map((user) => [user, [] as Outcome[]])),
      B: new Map(users.map((user) => [user, [] as Outcome[]])),
    };
    const probes = { A: [] as Outcome[], B: [] as Outcome[] };
    const round = async () => {
      await Promise.all([
        ...users.flatMap((user) => [
          check(guardA, user).then((outcome) => tally.A.get(user)!.push(outcome)),
          check(guardB, user).then((outcome) => tally.B.get(user)!.push(outcome)),
        ]),
        check(probeA, users[0]!).then((outcome) => probes.A.push(outcome)),
        check(probeB, users[0]!).then((outcome) => probes.B.push(outcome)),
      ]);
      await sleep(25);
    };

    const started = performance.now();
    while (performance.now() - started < 1_000) await round();
    expect(new Set([...probes.A, ...probes.B])).toEqual(new Set(['admitted']));
    const node = cluster.nodes[cluster.ports.indexOf(victim.port)]!;
    await node.kill();
    const killedAt = { A: probes.A.length, B: probes.B.length };

    // Recovered: ten Redis answers in a row on both probes after the kill. At most 30 s.
    const recovered = (outcomes: Outcome[], from: number) =>
      outcomes.length - from >= 10 && outcomes.slice(-10).every((each) => each === 'admitted');
    while (!(recovered(probes.A, killedAt.A) && recovered(probes.B, killedAt.B))) {
      if (performance.now() - started > 30_000) {
        throw new Error(`not recovered: A ${probes.A.slice(-5)}, B ${probes.B.slice(-5)}`);
      }
      await round();
    }
    // A few more rounds on the recovered cluster.
    for (let i = 0; i < 10; i++) await round();
    const elapsedMs = performance.now() - started;

    // During the failover each host applied its own fail mode, and only it.
    const afterKill = { A: probes.A.slice(killedAt.A), B: probes.B.slice(killedAt.B) };
    expect(afterKill.A).toContain('admitted-insured');
    expect(afterKill.A).not.toContain('unavailable');
    expect(afterKill.B).toContain('unavailable');
    expect(afterKill.B.some((each) => each.endsWith('insured'))).toBe(false);
    const victimOutcomesA = [...onVictim].flatMap((user) => tally.A.get(user)!);
    expect(victimOutcomesA).toContain('admitted-insured');

    // The promoted replica had no scripts: it answered NOSCRIPT, and EVAL ran them there.
    const errors = await redisCli(promoted.port, 'INFO', 'errorstats');
    const commands = await redisCli(promoted.port, 'INFO', 'commandstats');
    expect(statField(errors, 'errorstat_NOSCRIPT')).toBeGreaterThan(0);
    expect(statField(commands, 'cmdstat_eval')).toBeGreaterThan(0);
    const after = await clusterNodes(promoted.port);
    expect(after.find((each) => each.id === promoted.id)?.primary).toBe(true);

    // The bound of docs/limits.md, per user: one burst plus what refills in the run, once for
    // Redis, once more per failover of the user's primary (writes it had not replicated), and
    // once per host that enforced the limit alone (insurance).
    const perBucket = rule.limit + Math.ceil((elapsedMs * rule.limit) / rule.windowMs);
    for (const user of users) {
      const outcomes = [...tally.A.get(user)!, ...tally.B.get(user)!];
      const fromRedis = outcomes.filter((each) => each === 'admitted').length;
      const insured = outcomes.filter((each) => each === 'admitted-insured').length;
      const failovers = onVictim.has(user) ? 1 : 0;
      expect(fromRedis, user).toBeGreaterThanOrEqual(rule.limit);
      expect(fromRedis, user).toBeLessThanOrEqual((1 + failovers) * perBucket);
      expect(insured, user).toBeLessThanOrEqual(perBucket);
      expect(fromRedis + insured, user).toBeLessThanOrEqual((1 + failovers + 1) * perBucket);
      // Recovered: the last round of each host was a refusal (over the limit), not UNAVAILABLE,
      // and not the insurance store's.
      expect(tally.A.get(user)!.at(-1), user).toBe('refused');
      expect(tally.B.get(user)!.at(-1), user).toBe('refused');
    }
  }, 60_000);
});
