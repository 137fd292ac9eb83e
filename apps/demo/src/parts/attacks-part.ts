// Part 2: every attack of the threat model, live, against the layer that owns its defence.
import { allAttackCases } from '../attacks/all-attacks.ts';
import { formatMs } from '../cli/format.ts';
import { type AttackOutcome, type DemoPart, partReport } from './part.ts';

export const attacksPart: DemoPart = {
  name: 'attacks',
  title: 'Attacks',
  summary: 'Every attack of the threat model, tried live against the layer that owns the defence.',
  async run(reporter, resources) {
    const { style } = reporter;
    const attacks: AttackOutcome[] = [];
    for (const [index, attackCase] of allAttackCases.entries()) {
      reporter.progress(
        `  [${index + 1}/${allAttackCases.length}] ${attackCase.layer}: ${attackCase.attack}…`,
      );
      const started = performance.now();
      const result = await attackCase.run(resources).catch((error: unknown) => ({
        contained: false,
        outcome: `threw: ${error instanceof Error ? error.message : String(error)}`,
      }));
      attacks.push({
        attack: attackCase.attack,
        layer: attackCase.layer,
        ...result,
        ms: Math.round(performance.now() - started),
      });
    }
    reporter.line();
    reporter.table(
      ['attack', 'layer', 'outcome', 'time'],
      attacks.map((row) => [
        row.attack,
        row.layer,
        row.contained
          ? style.green(`${row.outcome} ✓ contained`)
          : style.red(`${row.outcome} ✗ NOT CONTAINED`),
        formatMs(row.ms),
      ]),
    );
    const escaped = attacks.filter((row) => !row.contained).length;
    reporter.line();
    reporter.line(
      escaped === 0
        ? style.green(`${attacks.length} of ${attacks.length} attacks contained.`)
        : style.red(`${escaped} of ${attacks.length} attacks were NOT contained.`),
    );
    return partReport('attacks', escaped, 'attacks not contained', [], attacks);
  },
};
