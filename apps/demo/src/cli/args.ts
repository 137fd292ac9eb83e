// Turns `pnpm demo [part] [--json] [--port N]` into a typed command, refusing unknown input
// with a message rather than a stack trace.
import { parseArgs } from 'node:util';

/** The parts a user can run alone; no part means the guided run of all of them. */
export const partNames = ['isolate', 'attacks', 'subprocess', 'parser', 'limits'] as const;

/** One part of the guided run. */
export type PartName = (typeof partNames)[number];

/** What the command line asked for. */
export type DemoCommand =
  | { kind: 'run'; parts: readonly PartName[]; json: boolean }
  | { kind: 'serve'; port: number; host: string }
  | { kind: 'help' };

/** Usage text printed by `--help` and after a bad argument. */
export const usage = `Usage: pnpm demo [part] [--json]
       pnpm demo serve [--port 3000] [--host 127.0.0.1]

Parts (no part = the guided run of all of them, in this order):
  isolate      LLM-written snippets in V8 isolates against sample data
  attacks      every attack of the threat model against the layer that owns it
  subprocess   commands under a restrictive OS sandbox policy
  parser       a telemetry feed, then a hostile one, through the parser host
  limits       tiers 3 and 4 refusing executions (in memory, or Redis with REDIS_URL)
  serve        the layers behind an HTTP API and a playground page

Options:
  --json       print one JSON document instead of progress (exit code unchanged)
  --port N     port for serve (default 3000; 0 picks a free one)
  --host H     host for serve (default 127.0.0.1)
  -h, --help   this text

Exit code: 0 when every attack was contained and every part ran, 1 otherwise, 2 on bad usage.`;

/** Thrown for arguments the demo does not understand; main prints it with the usage. */
export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UsageError';
  }
}

/** Parses `argv` (without the node and script paths). */
export function parseDemoArgs(argv: readonly string[]): DemoCommand {
  let parsed: ReturnType<typeof parse>;
  try {
    parsed = parse(argv);
  } catch (error) {
    throw new UsageError(error instanceof Error ? error.message : String(error));
  }
  const { values, positionals } = parsed;
  if (values.help) return { kind: 'help' };
  if (positionals.length > 1)
    throw new UsageError(`Expected one part, got ${positionals.join(' ')}`);
  const [part] = positionals;
  if (part === 'serve') {
    return { kind: 'serve', port: parsePort(values.port), host: values.host ?? '127.0.0.1' };
  }
  if (values.port !== undefined || values.host !== undefined) {
    throw new UsageError('--port and --host apply to serve only');
  }
  if (part === undefined) return { kind: 'run', parts: partNames, json: values.json ?? false };
  if (!isPartName(part)) throw new UsageError(`Unknown part: ${part}`);
  return { kind: 'run', parts: [part], json: values.json ?? false };
}

function parse(argv: readonly string[]) {
  return parseArgs({
    args: [...argv],
    allowPositionals: true,
    strict: true,
    options: {
      json: { type: 'boolean' },
      port: { type: 'string' },
      host: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
}

function parsePort(value: string | undefined): number {
  if (value === undefined) return Number(process.env.PORT ?? 3000);
  const port = Number(value);
  if (!Number.isInteger(port) || port < 0 || port > 65_535) {
    throw new UsageError(`--port must be an integer from 0 to 65535, got ${value}`);
  }
  return port;
}

function isPartName(value: string): value is PartName {
  return (partNames as readonly string[]).includes(value);
}
