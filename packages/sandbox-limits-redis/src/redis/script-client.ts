// The narrow surface the Redis backend needs from a client, and adapters for the two common
// clients. Structural types only: this package never imports ioredis or redis, so it installs and
// loads without either, and the caller keeps owning the client's lifecycle.
import { validate } from '@coda/sandbox-core';
import { withMethods } from '../guards/guard-options.ts';
import { type CorkableStream, coalescedWrites } from './coalesced-writes.ts';

/** Runs Lua scripts on the node that owns the first key. Implement it to use any client. */
export interface RedisScriptClient {
  /** `EVALSHA sha numkeys ...keys ...args`; rejects with a `NOSCRIPT` error when not cached. */
  evalsha(sha: string, keys: readonly string[], args: readonly string[]): Promise<unknown>;
  /** `EVAL script numkeys ...keys ...args` (also caches the script on that node). */
  eval(script: string, keys: readonly string[], args: readonly string[]): Promise<unknown>;
}

/** The part of an ioredis `Redis` or `Cluster` the adapter calls. */
export interface IoredisLike {
  /** ioredis's `evalsha(sha, numKeys, ...keys, ...args)`. */
  evalsha(sha: string, numKeys: number, ...keysAndArgs: string[]): Promise<unknown>;
  /** ioredis's `eval(script, numKeys, ...keys, ...args)`. */
  eval(script: string, numKeys: number, ...keysAndArgs: string[]): Promise<unknown>;
  /** The client's socket (standalone `Redis`): corked for the rest of a tick to batch writes. */
  readonly stream?: CorkableStream | undefined;
  /** True on an ioredis `Cluster`: it has a socket per node, none of which is corked. */
  readonly isCluster?: boolean | undefined;
  /** The client's options: with `enableAutoPipelining` the client batches by itself. */
  readonly options?: {
    /** Whether the client already batches the commands of one tick. */
    readonly enableAutoPipelining?: boolean | undefined;
  };
}

/** The part of a node-redis client (`createClient` or `createCluster`, v5 or v6) the adapter calls. */
export interface NodeRedisLike {
  /** node-redis's `evalSha(sha, { keys, arguments })`. */
  evalSha(sha: string, options: { keys: string[]; arguments: string[] }): Promise<unknown>;
  /** node-redis's `eval(script, { keys, arguments })`. */
  eval(script: string, options: { keys: string[]; arguments: string[] }): Promise<unknown>;
}

/**
 * Adapts an ioredis client — `new Redis(...)` or `new Redis.Cluster(...)` — that you created and
 * will close. A `Cluster` routes each script by its key's slot. On a standalone client the checks
 * started in the same tick go out in a few socket writes rather than one each (the socket is
 * corked, and sent every 16 commands and at the end of the tick), unless the client
 * auto-pipelines (`enableAutoPipelining`); each check still settles with its own reply or error
 * as soon as it arrives.
 */
export function fromIoredis(client: IoredisLike): RedisScriptClient {
  validate(
    withMethods<IoredisLike>(
      ['evalsha', 'eval'],
      'expected an ioredis Redis or Cluster (a node-redis client goes through fromNodeRedis)',
    ),
    client,
    'ioredis client',
  );
  const beforeWrite =
    client.isCluster === true || client.options?.enableAutoPipelining === true
      ? undefined
      : coalescedWrites(() => client.stream);
  return {
    evalsha: (sha, keys, args) => {
      beforeWrite?.();
      return client.evalsha(sha, keys.length, ...keys, ...args);
    },
    eval: (script, keys, args) => client.eval(script, keys.length, ...keys, ...args),
  };
}

/**
 * Adapts a node-redis client — `createClient(...)` or `createCluster(...)`, connected — that you
 * created and will close.
 */
export function fromNodeRedis(client: NodeRedisLike): RedisScriptClient {
  validate(
    withMethods<NodeRedisLike>(
      ['evalSha', 'eval'],
      'expected a node-redis client or cluster (an ioredis client goes through fromIoredis)',
    ),
    client,
    'node-redis client',
  );
  return {
    evalsha: (sha, keys, args) => client.evalSha(sha, { keys: [...keys], arguments: [...args] }),
    eval: (script, keys, args) => client.eval(script, { keys: [...keys], arguments: [...args] }),
  };
}
