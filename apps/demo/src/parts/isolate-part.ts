// Part 1: realistic LLM-written snippets in V8 isolates, reading the sample data through
// `dataProxy.request`, with their events shown as they arrive and the stats of each run.
import type { JsonValue, SandboxEvent } from '@coda/sandbox-core';
import { formatStats, truncate } from '../cli/format.ts';
import type { Reporter } from '../cli/reporter.ts';
import { examples } from '../snippets/examples.ts';
import { type DemoPart, partReport } from './part.ts';
import { runToEnd } from './run-execution.ts';

export const isolatePart: DemoPart = {
  name: 'isolate',
  title: 'Isolate engine',
  summary: 'LLM-written snippets in V8 isolates, reading sample data through dataProxy.request.',
  async run(reporter, resources) {
    const engine = await resources.engine();
    const runs: JsonValue[] = [];
    let failed = 0;
    for (const example of examples) {
      reporter.line();
      reporter.line(reporter.style.bold(`  ▸ ${example.title}`));
      const handle = engine.submit({
        code: example.code,
        context: { executionId: `example-${example.id}-${Date.now()}` },
      });
      const { terminal, statusEvents } = await runToEnd(handle, (event) => show(reporter, event));
      if (terminal.type === 'error') failed++;
      reporter.line(reporter.style.dim(`    ${formatStats(terminal.stats)}`));
      runs.push({ example: example.id, statusEvents, terminal: terminal as unknown as JsonValue });
    }
    return partReport('isolate', failed, 'snippets ended in an error', runs);
  },
};

function show(reporter: Reporter, event: SandboxEvent): void {
  const { style } = reporter;
  if (event.type === 'status') {
    reporter.line(`    ${style.cyan(event.source.padEnd(12))} ${truncate(event.message, 90)}`);
  } else if (event.type === 'result') {
    reporter.line(
      `    ${style.green('result'.padEnd(12))} ${truncate(JSON.stringify(event.payload), 90)}`,
    );
  } else {
    reporter.line(`    ${style.red(event.code.padEnd(12))} ${truncate(event.message, 90)}`);
  }
}
