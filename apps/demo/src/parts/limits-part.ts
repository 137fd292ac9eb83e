// Part 5: tiers 3 and 4 refusing executions. The engine was given the guards (core's
// ExecutionGuard interface); it asks them before each run and ends refused runs with their code.
import { randomUUID } from 'node:crypto';
import type { ExecutionContext, JsonObject, TerminalEvent } from '@coda/sandbox-core';
import type { SandboxEngine } from '@coda/sandbox-isolate';
import { formatMs } from '../cli/format.ts';
import { guidedRunGuardSettings } from '../compose/guards.ts';
import { type DemoPart, partReport } from './part.ts';
import { runToEnd } from './run-execution.ts';

interface Step {
  tier: string;
  context: { userId: string; conversationId: string; turnId: string };
  /** `result` or the error code this step must end with. */
  expect: string;
}

function plan(): Step[] {
  // Fresh ids per run: on a shared Redis an earlier run's counts must not decide this one.
  const run = randomUUID().slice(0, 8);
  const { maxExecutionsPerTurn: perTurn, ratePerUser } = guidedRunGuardSettings;
  const turn = { userId: `ana-${run}`, conversationId: `chat-${run}`, turnId: 'turn-1' };
  const budget = Array.from({ length: perTurn + 1 }, (_, index) => ({
    tier: 'tier 3: one turn',
    context: turn,
    expect: index < perTurn ? 'result' : 'BUDGET_EXHAUSTED',
  }));
  const rate = Array.from({ length: ratePerUser + 1 }, (_, index) => ({
    tier: 'tier 4: one user',
    context: { userId: `bob-${run}`, conversationId: `chat-${run}-${index}`, turnId: 'turn-1' },
    expect: index < ratePerUser ? 'result' : 'RATE_LIMITED',
  }));
  return [...budget, ...rate];
}

export const limitsPart: DemoPart = {
  name: 'limits',
  title: 'Limits (tiers 3 and 4)',
  summary: 'Per-turn budgets and per-user rate limits, shared by every host through the store.',
  async run(reporter, resources) {
    const { style } = reporter;
    const [engine, store] = await Promise.all([resources.engine(), resources.limitStore()]);
    const { maxExecutionsPerTurn, ratePerUser, windowMs } = guidedRunGuardSettings;
    reporter.line(
      `  store: ${style.bold(store.description)} · ${maxExecutionsPerTurn} executions per turn · ` +
        `${ratePerUser} per user per ${formatMs(windowMs)}`,
    );
    const rows: string[][] = [];
    const runs: JsonObject[] = [{ store: store.description }];
    let unexpected = 0;
    for (const step of plan()) {
      const terminal = await submit(engine, step.context);
      const outcome = terminal.type === 'result' ? 'result' : terminal.code;
      if (outcome !== step.expect) unexpected++;
      const retry = terminal.type === 'error' ? terminal.details?.retryAfterMs : undefined;
      const detail = typeof retry === 'number' ? formatMs(retry) : '—';
      rows.push([
        step.tier,
        `${step.context.userId} / ${step.context.conversationId}`,
        outcome === 'result' ? style.green('admitted, ran') : style.yellow(`refused: ${outcome}`),
        detail,
      ]);
      runs.push({ tier: step.tier, ...step.context, outcome, expected: step.expect });
    }
    reporter.table(['tier', 'user / conversation', 'outcome', 'retry after'], rows);
    return partReport('limits', unexpected, 'executions did not meet the expected limit', runs);
  },
};

async function submit(
  engine: SandboxEngine,
  context: Omit<ExecutionContext, 'executionId'>,
): Promise<TerminalEvent> {
  const handle = engine.submit({
    code: 'return 1;',
    context: { executionId: randomUUID(), ...context },
  });
  return (await runToEnd(handle)).terminal;
}
