// One row of the attack table: an attack, the layer that owns the defence, and how to try it.
import type { DemoResources } from '../compose/resources.ts';

/** What trying an attack showed. */
export interface AttackResult {
  /** Whether the layer held. */
  contained: boolean;
  /** The error code that ended it, or what was observed instead. */
  outcome: string;
}

/** An attack the guided run tries live. */
export interface AttackCase {
  attack: string;
  layer: 'isolate' | 'subprocess' | 'parser-host' | 'limits';
  /** Tries the attack. May throw: the table then shows it as not contained. */
  run(resources: DemoResources): Promise<AttackResult>;
}
