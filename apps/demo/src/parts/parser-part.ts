// Part 4: a telemetry feed parsed in a confined child, then hostile feeds that end in clean
// error results while the host carries on.
import type { JsonObject, JsonValue } from '@coda/sandbox-core';
import type { ConfinementReport, ParserResult } from '@coda/sandbox-parser-host';
import { formatMs, truncate } from '../cli/format.ts';
import type { Reporter } from '../cli/reporter.ts';
import {
  loopingFeed,
  memoryBombFeed,
  sampleTelemetryFeed,
} from '../sample-data/telemetry-feeds.ts';
import { type DemoPart, partReport } from './part.ts';

interface ParserCall {
  label: string;
  parser: string;
  payload: JsonValue;
  kwargs?: JsonObject;
  /** Whether the call should succeed; hostile feeds must fail cleanly instead. */
  expectOk: boolean;
}

const calls: readonly ParserCall[] = [
  {
    label: 'sample feed',
    parser: 'flatten_telemetry_frames',
    payload: sampleTelemetryFeed,
    expectOk: true,
  },
  {
    label: 'sample feed',
    parser: 'build_telemetry_segments',
    payload: sampleTelemetryFeed,
    kwargs: { gapMs: 5_000 },
    expectOk: true,
  },
  {
    label: 'hostile: run-length bomb',
    parser: 'flatten_telemetry_frames',
    payload: memoryBombFeed,
    expectOk: false,
  },
  {
    label: 'hostile: cyclic chain',
    parser: 'build_telemetry_segments',
    payload: loopingFeed,
    expectOk: false,
  },
  { label: 'unknown parser', parser: '__proto__', payload: {}, expectOk: false },
];

export const parserPart: DemoPart = {
  name: 'parser',
  title: 'Parser host',
  summary:
    'Untrusted feeds parsed in a short-lived, confined Node child per call (JSON over stdio).',
  async run(reporter, resources) {
    const host = resources.parserHost();
    const runs: JsonValue[] = [];
    let unexpected = 0;
    let confinement: ConfinementReport | undefined;
    for (const call of calls) {
      reporter.progress(`  ${call.parser}(${call.label})…`);
      const result = await host.runParser(
        call.parser,
        call.payload,
        call.kwargs ? { kwargs: call.kwargs } : {},
      );
      if (result.ok !== call.expectOk) unexpected++;
      confinement ??= result.confinement;
      describe(reporter, call, result);
      runs.push(summarise(call, result));
    }
    reporter.line(reporter.style.dim(`  ${describeConfinement(confinement)}`));
    return partReport('parser', unexpected, 'calls did not end as expected', runs);
  },
};

function describe(reporter: Reporter, call: ParserCall, result: ParserResult): void {
  const { style } = reporter;
  const time = formatMs(result.durationMs);
  reporter.line(`  ${style.bold(call.parser)} ${style.dim(`(${call.label})`)}`);
  if (result.ok) {
    const data = Array.isArray(result.data) ? result.data : [];
    reporter.line(
      `    ${style.green('ok')} ${data.length} items in ${time}: ${truncate(JSON.stringify(data.slice(0, 2)), 110)}`,
    );
    return;
  }
  const mark = call.expectOk ? style.red('failed') : style.green('clean error');
  reporter.line(
    `    ${mark} ${result.code ?? ''} "${truncate(result.error ?? '', 80)}" after ${time}` +
      ` (timedOut ${result.timedOut}, exitCode ${result.exitCode}${result.signal ? `, ${result.signal}` : ''})`,
  );
}

function describeConfinement(report: ConfinementReport | undefined): string {
  if (report === undefined) return 'confinement: none reported';
  const parts = [
    `children ran in ${report.sandbox === 'none' ? 'no OS sandbox' : (report.backend ?? report.sandbox)}`,
    `memory bounded by ${report.memory}`,
    `CPU by ${report.cpu}`,
    "Node's permission model",
  ];
  return `${parts.join(' · ')}${report.degraded ? ` (degraded: ${report.degraded})` : ''}`;
}

function summarise(call: ParserCall, result: ParserResult): JsonObject {
  const summary: JsonObject = {
    parser: call.parser,
    feed: call.label,
    ok: result.ok,
    timedOut: result.timedOut,
    exitCode: result.exitCode,
    durationMs: Math.round(result.durationMs),
  };
  if (result.ok) summary.items = Array.isArray(result.data) ? result.data.length : 1;
  if (result.error !== undefined) summary.error = result.error;
  if (result.code !== undefined) summary.code = result.code;
  // A plain JSON copy: the report's arrays are readonly, JSON values are not.
  if (result.confinement !== undefined) {
    summary.confinement = JSON.parse(JSON.stringify(result.confinement)) as JsonObject;
  }
  return summary;
}
