// The parser host for the demo's telemetry parsers: one confined child per call, the parser
// module the only code it may read, bubblewrap when the machine has it.
import { createParserHost, type ParserHost } from '@coda/sandbox-parser-host';

/** The module whose named exports are the demo's parsers. */
export const telemetryParserModule = new URL('../parsers/telemetry-parsers.ts', import.meta.url);

/**
 * A host for the telemetry parsers with limits sized for feeds: 3 s wall clock, 2 s CPU and
 * 128 MiB, well under seed 004's defaults (10 s, 5 s, 256 MiB) so the hostile feeds end fast.
 */
export function createTelemetryParserHost(): ParserHost {
  return createParserHost({
    module: telemetryParserModule,
    limits: { timeout: 3_000, cpuSecs: 2, memoryBytes: 128 * 1024 * 1024 },
    maxConcurrent: 2,
    // A warm spare hides Node's start-up from the next call; the demo's calls come one by one.
    warmSpare: true,
  });
}
