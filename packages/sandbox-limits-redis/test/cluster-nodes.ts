// What the cluster failover test reads from CLUSTER NODES and INFO: who a node is, whom it
// replicates, which slots it serves, and when replicas are in sync.
import { setTimeout as sleep } from 'node:timers/promises';
import { redisCli } from './redis-servers.ts';

/** One line of CLUSTER NODES. */
export interface ClusterNode {
  id: string;
  port: number;
  primary: boolean;
  /** The primary's id for a replica ('-' for a primary). */
  primaryId: string;
  failed: boolean;
  slots: [number, number][];
}

export async function clusterNodes(port: number): Promise<ClusterNode[]> {
  const lines = (await redisCli(port, 'CLUSTER', 'NODES')).split('\n').filter(Boolean);
  return lines.map((line) => {
    const [id, address, flags, primaryId, , , , , ...slots] = line.split(' ');
    return {
      id: id!,
      port: Number(address!.split('@')[0]!.split(':')[1]),
      primary: flags!.includes('master'),
      primaryId: primaryId!,
      failed: flags!.includes('fail'),
      slots: slots
        .filter((range) => !range.startsWith('['))
        .map((range) => {
          const [from, to] = range.split('-').map(Number);
          return [from!, to ?? from!] as [number, number];
        }),
    };
  });
}

/** The slot of a key (the hash tag decides). */
export async function keySlot(port: number, key: string): Promise<number> {
  return Number(await redisCli(port, 'CLUSTER', 'KEYSLOT', key));
}

/** The live primary serving `slot`, as `port` sees the cluster. */
export async function primaryOf(port: number, slot: number): Promise<ClusterNode> {
  const nodes = await clusterNodes(port);
  const owner = nodes.find(
    (node) =>
      node.primary && !node.failed && node.slots.some(([from, to]) => slot >= from && slot <= to),
  );
  if (owner === undefined) throw new Error(`no live primary for slot ${slot}`);
  return owner;
}

/**
 * Waits until every node is either a primary or a replica whose link to its primary is up, and
 * every node says the cluster is ok: writes replicate from the start. At most 20 s.
 */
export async function clusterSettled(ports: number[]): Promise<void> {
  const deadline = Date.now() + 20_000;
  for (const port of ports) {
    for (;;) {
      const [replication, info] = await Promise.all([
        redisCli(port, 'INFO', 'replication'),
        redisCli(port, 'CLUSTER', 'INFO'),
      ]);
      const linked =
        replication.includes('role:master') || replication.includes('master_link_status:up');
      if (linked && info.includes('cluster_state:ok')) break;
      if (Date.now() > deadline) throw new Error(`node ${port} not settled: ${replication}`);
      await sleep(100);
    }
  }
}

/**
 * The replica of `primary` once it replicates from it with its link up, as the primary sees the
 * cluster. A node restarted after a failover can report `role:master` for a moment before it
 * learns it was replaced, so `clusterSettled` alone does not promise the next victim a replica.
 * At most 20 s.
 */
export async function linkedReplicaOf(primary: ClusterNode): Promise<ClusterNode> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    const replica = (await clusterNodes(primary.port)).find(
      (node) => node.primaryId === primary.id && !node.failed,
    );
    if (replica !== undefined) {
      const replication = await redisCli(replica.port, 'INFO', 'replication');
      if (replication.includes('master_link_status:up')) return replica;
    }
    if (Date.now() > deadline) throw new Error(`no linked replica of node ${primary.port}`);
    await sleep(100);
  }
}

/** A field of INFO errorstats or commandstats (0 when absent). */
export const statField = (info: string, field: string) =>
  Number(new RegExp(`${field}:(?:\\w+=)?(\\d+)`).exec(info)?.[1] ?? 0);
