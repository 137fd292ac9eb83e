// Hostile feeds against the parser host: the parser has the bug, the child's limits contain it.
import type { JsonValue } from '@coda/sandbox-core';
import type { ParserRuntime } from '@coda/sandbox-parser-host';
import { loopingFeed, memoryBombFeed } from '../sample-data/telemetry-feeds.ts';
import type { AttackCase } from './attack-case.ts';

function hostileFeed(
  attack: string,
  parser: string,
  payload: JsonValue,
  containedBy: readonly string[],
  runtime: ParserRuntime = 'node',
): AttackCase {
  return {
    attack,
    layer: 'parser-host',
    async run(resources) {
      const result = await resources.parserHost(runtime).runParser(parser, payload);
      if (result.ok) return { contained: false, outcome: 'parsed without a limit firing' };
      const code = result.code ?? 'error';
      return { contained: containedBy.includes(code), outcome: code };
    },
  };
}

/**
 * A run-length bomb and a cyclic frame chain, each ending in a clean error result. Whichever limit
 * fires first holds: on a slow machine the bomb may meet the wall clock before the memory limit.
 */
export const parserAttackCases: readonly AttackCase[] = [
  hostileFeed('memory exhaustion (feed bomb)', 'flatten_telemetry_frames', memoryBombFeed, [
    'OOM',
    'TIMEOUT',
  ]),
  hostileFeed('CPU exhaustion (cyclic feed)', 'build_telemetry_segments', loopingFeed, ['TIMEOUT']),
  hostileFeed(
    'memory exhaustion (feed bomb, Python parser)',
    'flatten_telemetry_frames',
    memoryBombFeed,
    ['OOM', 'TIMEOUT'],
    'python',
  ),
  hostileFeed(
    'CPU exhaustion (cyclic feed, Python parser)',
    'build_telemetry_segments',
    loopingFeed,
    ['TIMEOUT'],
    'python',
  ),
];
