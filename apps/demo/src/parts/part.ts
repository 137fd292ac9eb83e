// The contract between the guided run and each of its parts.
import type { JsonValue } from '@coda/sandbox-core';
import type { PartName } from '../cli/args.ts';
import type { Reporter } from '../cli/reporter.ts';
import type { DemoResources } from '../compose/resources.ts';

/** One attack tried against a layer, and what became of it. */
export interface AttackOutcome {
  /** The attack, as the threat model names it. */
  attack: string;
  /** The layer that owns the defence. */
  layer: string;
  /** The error code that ended it, or `contained` with what was observed. */
  outcome: string;
  /** Whether the layer held: the attack reached nothing and the host is unharmed. */
  contained: boolean;
  /** Wall-clock milliseconds from submission to the terminal outcome. */
  ms: number;
}

/** What a part reports when it is done. */
export interface PartReport {
  part: PartName;
  /** `ok` ran as expected; `failed` something did not. */
  status: 'ok' | 'failed';
  /** Why it failed. */
  reason?: string;
  /** Attacks the part tried (empty for parts that try none). */
  attacks: AttackOutcome[];
  /** What the part ran and saw, for --json readers. */
  runs: JsonValue[];
}

/** One part of the guided run. */
export interface DemoPart {
  readonly name: PartName;
  readonly title: string;
  /** One line on what the part shows. */
  readonly summary: string;
  run(reporter: Reporter, resources: DemoResources): Promise<PartReport>;
}

/**
 * Builds a part's report: `ok`, or `failed` with `${failures} ${what}` as the reason when
 * anything did not go as the part expected.
 */
export function partReport(
  part: PartName,
  failures: number,
  what: string,
  runs: JsonValue[],
  attacks: AttackOutcome[] = [],
): PartReport {
  if (failures === 0) return { part, status: 'ok', attacks, runs };
  return { part, status: 'failed', reason: `${failures} ${what}`, attacks, runs };
}
