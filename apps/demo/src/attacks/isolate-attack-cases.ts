// Seed 000's attacks as table rows: each snippet is submitted to the engine with its limits and
// counts as contained when the engine ended it with an expected code and the host received no
// more status events than the caps allow.
import { defaultExecutionLimits } from '@coda/sandbox-core';
import { truncate } from '../cli/format.ts';
import { runToEnd } from '../parts/run-execution.ts';
import type { AttackCase } from './attack-case.ts';
import { type IsolateAttack, isolateAttacks } from './isolate-attacks.ts';

function toCase(attack: IsolateAttack): AttackCase {
  return {
    attack: attack.attack,
    layer: 'isolate',
    async run(resources) {
      const engine = await resources.engine();
      const handle = engine.submit({
        code: attack.code,
        ...(attack.limits === undefined ? {} : { limits: attack.limits }),
        context: { executionId: `attack-${attack.id}-${Date.now()}` },
      });
      const { terminal, statusEvents } = await runToEnd(handle);
      if (terminal.type === 'result') {
        return {
          contained: false,
          outcome: `returned ${JSON.stringify(terminal.payload).slice(0, 40)}`,
        };
      }
      const statusCap = Math.min(
        attack.limits?.maxStatusEvents ?? defaultExecutionLimits.maxStatusEvents,
        attack.limits?.maxConsoleCalls ?? defaultExecutionLimits.maxConsoleCalls,
      );
      if (statusEvents > statusCap) {
        return {
          contained: false,
          outcome: `${terminal.code} after ${statusEvents} status events`,
        };
      }
      // For escapes the message is the evidence: the global the attack reached for is not there.
      const why = terminal.code === 'RUNTIME' ? ` (${truncate(terminal.message, 44)})` : '';
      return {
        contained: attack.containedBy.includes(terminal.code),
        outcome: terminal.code + why,
      };
    },
  };
}

/** One row per attack of the threat model, all owned by the isolate engine. */
export const isolateAttackCases: readonly AttackCase[] = isolateAttacks.map(toCase);
