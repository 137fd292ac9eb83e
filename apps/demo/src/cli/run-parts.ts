// Runs the chosen parts one after the other, sharing one set of layers, and sums up. A part that
// throws is reported as failed: the run goes on, the host never crashes.
import type { JsonObject } from '@coda/sandbox-core';
import { createDemoResources } from '../compose/resources.ts';
import { allParts } from '../parts/all-parts.ts';
import type { PartReport } from '../parts/part.ts';
import type { PartName } from './args.ts';
import { formatMs } from './format.ts';
import type { Reporter } from './reporter.ts';

/** The whole run, as `--json` prints it. */
export interface DemoSummary {
  /** True when every part ran as expected and every attack was contained. */
  ok: boolean;
  /** Attacks tried, and how many were contained. */
  attacks: { total: number; contained: number };
  parts: PartReport[];
  durationMs: number;
  machine: JsonObject;
}

/** Runs `parts` in order and returns the summary; main turns it into the exit code. */
export async function runParts(
  parts: readonly PartName[],
  reporter: Reporter,
): Promise<DemoSummary> {
  const started = performance.now();
  const resources = createDemoResources();
  const reports: PartReport[] = [];
  try {
    for (const name of parts) {
      const part = allParts[name];
      reporter.heading(part.title, part.summary);
      const partStarted = performance.now();
      const report = await part.run(reporter, resources).catch(
        (error: unknown): PartReport => ({
          part: name,
          status: 'failed',
          reason: error instanceof Error ? error.message : String(error),
          attacks: [],
          runs: [],
        }),
      );
      reports.push(report);
      reporter.line(statusLine(reporter, report, performance.now() - partStarted));
    }
  } finally {
    await resources.close();
  }
  const attacks = reports.flatMap((report) => report.attacks);
  const contained = attacks.filter((attack) => attack.contained).length;
  const ok = reports.every((report) => report.status !== 'failed') && contained === attacks.length;
  return {
    ok,
    attacks: { total: attacks.length, contained },
    parts: reports,
    durationMs: Math.round(performance.now() - started),
    machine: {
      node: process.version,
      platform: `${process.platform}-${process.arch}`,
      redis: process.env.REDIS_URL ? 'REDIS_URL' : 'memory',
    },
  };
}

function statusLine(reporter: Reporter, report: PartReport, ms: number): string {
  const { style } = reporter;
  const time = style.dim(`(${formatMs(ms)})`);
  if (report.status === 'ok') return `${style.green('✓')} ${report.part} ${time}`;
  return `${style.red('✗')} ${report.part}: ${report.reason} ${time}`;
}
