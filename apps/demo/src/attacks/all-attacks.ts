// Every attack the guided run tries, grouped by the layer that owns the defence.
import type { AttackCase } from './attack-case.ts';
import { isolateAttackCases } from './isolate-attack-cases.ts';
import { limitsAttackCases } from './limits-attack-cases.ts';
import { parserAttackCases } from './parser-attack-cases.ts';
import { subprocessAttackCases } from './subprocess-attack-cases.ts';

/** The attack table's rows, in the order they are run. */
export const allAttackCases: readonly AttackCase[] = [
  ...isolateAttackCases,
  ...subprocessAttackCases,
  ...parserAttackCases,
  ...limitsAttackCases,
];
