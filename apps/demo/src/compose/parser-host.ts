// The parser hosts for the demo's telemetry parsers, one per runtime: one confined child per
// call, the parser module's folder the only code it may read, bubblewrap when the machine has it.
import { existsSync } from 'node:fs';
import { createParserHost, type ParserHost, type ParserRuntime } from '@coda/sandbox-parser-host';

/** The module whose named exports are the demo's JavaScript parsers. */
export const telemetryParserModule = new URL('../parsers/telemetry-parsers.ts', import.meta.url);

/** The module whose public functions are the same parsers in Python. */
export const pythonTelemetryParserModule = new URL(
  '../parsers/python/telemetry_parsers.py',
  import.meta.url,
);

/**
 * The interpreter of the Python host: CODA_DEMO_PYTHON, else the system's python3 where there
 * is one (a version manager's build under a private home is unreadable to the sandbox user),
 * else `python3` on PATH.
 */
export function demoPython(env: NodeJS.ProcessEnv = process.env): string {
  return env.CODA_DEMO_PYTHON ?? (existsSync('/usr/bin/python3') ? '/usr/bin/python3' : 'python3');
}

/**
 * A host for the telemetry parsers with limits sized for feeds: 3 s wall clock, 2 s CPU and
 * 128 MiB, well under seed 004's defaults (10 s, 5 s, 256 MiB) so the hostile feeds end fast.
 */
export function createTelemetryParserHost(runtime: ParserRuntime = 'node'): ParserHost {
  return createParserHost({
    ...(runtime === 'python'
      ? { module: pythonTelemetryParserModule, python: demoPython() }
      : { module: telemetryParserModule }),
    limits: { timeout: 3_000, cpuSecs: 2, memoryBytes: 128 * 1024 * 1024 },
    maxConcurrent: 2,
    // A warm spare hides the interpreter's start-up from the next call; the demo's calls come one by one.
    warmSpare: true,
  });
}
