// Turns `pnpm demo [part] [--json] [--port N]` into a typed command, refusing unknown input
// with a message rather than a stack trace.
import { parseArgs } from 'node:util';
import {
  defaultGuardSettings,
  type GuardSettings,
  GuardSettingsSchema,
} from '../compose/guards.ts';

/** The parts a user can run alone; no part means the guided run of all of them. */
export const partNames = ['isolate', 'attacks', 'subprocess', 'parser', 'limits'] as const;

/** One part of the guided run. */
export type PartName = (typeof partNames)[number];

/** What the command line asked for. */
export type DemoCommand =
  | { kind: 'run'; parts: readonly PartName[]; json: boolean }
  | { kind: 'serve'; port: number; host: string; admission: GuardSettings }
  | { kind: 'help' };

/**
 * The admission limits of `serve`: each a flag, or else an environment variable, or else the
 * default. Data, so that the usage text, the parser and the README say the same.
 */
const admissionFlags = [
  {
    flag: 'rate',
    env: 'DEMO_RATE',
    field: 'ratePerUser',
    what: 'executions per user per minute, sustained (tier 4)',
  },
  {
    flag: 'burst',
    env: 'DEMO_BURST',
    field: 'burst',
    what: 'executions per user back to back before the rate applies',
  },
  {
    flag: 'turn-budget',
    env: 'DEMO_TURN_BUDGET',
    field: 'maxExecutionsPerTurn',
    what: 'executions per conversation turn (tier 3)',
  },
  {
    flag: 'concurrency',
    env: 'DEMO_CONCURRENCY',
    field: 'maxConcurrentPerUser',
    what: 'executions one user may have running at once',
  },
] as const satisfies readonly {
  flag: string;
  env: string;
  field: keyof GuardSettings;
  what: string;
}[];

const admissionUsage = admissionFlags
  .map(({ flag, env, field, what }) => {
    const left = `  --${flag} N`.padEnd(20);
    return `${left}${what}\n${' '.repeat(20)}(default ${defaultGuardSettings[field]}, or $${env})`;
  })
  .join('\n');

/** Usage text printed by `--help` and after a bad argument. */
export const usage = `Usage: pnpm demo [part] [--json]
       pnpm demo serve [--port 3000] [--host 127.0.0.1] [--rate N] [--burst N]
                       [--turn-budget N] [--concurrency N]

Parts (no part = the guided run of all of them, in this order):
  isolate      LLM-written snippets in V8 isolates against sample data
  attacks      every attack of the threat model against the layer that owns it
  subprocess   commands under a restrictive OS sandbox policy
  parser       a telemetry feed, then a hostile one, through the parser host
  limits       tiers 3 and 4 refusing executions (in memory, or Redis with REDIS_URL)
  serve        the layers behind an HTTP API and a playground page

Options:
  --json            print one JSON document instead of progress (exit code unchanged)
  -h, --help        this text

Options of serve:
  --port N          port (default 3000, or $PORT; 0 picks a free one)
  --host H          host (default 127.0.0.1)
${admissionUsage}
  Limits are kept in memory, or in Redis when $REDIS_URL is set.

Exit code: 0 when every attack was contained and every part ran, 1 otherwise, 2 on bad usage.`;

/** Thrown for arguments the demo does not understand; main prints it with the usage. */
export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UsageError';
  }
}

/** Parses `argv` (without the node and script paths); `env` supplies what flags leave out. */
export function parseDemoArgs(
  argv: readonly string[],
  env: NodeJS.ProcessEnv = process.env,
): DemoCommand {
  let parsed: ReturnType<typeof parse>;
  try {
    // `pnpm demo -- serve` passes the separator on; it means nothing here.
    parsed = parse(argv[0] === '--' ? argv.slice(1) : argv);
  } catch (error) {
    throw new UsageError(error instanceof Error ? error.message : String(error));
  }
  const { values, positionals } = parsed;
  if (values.help) return { kind: 'help' };
  if (positionals.length > 1)
    throw new UsageError(`Expected one part, got ${positionals.join(' ')}`);
  const [part] = positionals;
  if (part === 'serve') {
    return {
      kind: 'serve',
      port: parsePort(values.port ?? env.PORT),
      host: values.host ?? '127.0.0.1',
      admission: parseAdmission(values, env),
    };
  }
  const serveOnly = ['port', 'host', ...admissionFlags.map(({ flag }) => flag)] as const;
  const given = serveOnly.filter((flag) => values[flag] !== undefined);
  if (given.length > 0) {
    throw new UsageError(`${given.map((flag) => `--${flag}`).join(', ')}: for serve only`);
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
      rate: { type: 'string' },
      burst: { type: 'string' },
      'turn-budget': { type: 'string' },
      concurrency: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
}

function parsePort(value: string | undefined): number {
  if (value === undefined || value === '') return 3_000;
  const port = Number(value);
  if (!Number.isInteger(port) || port < 0 || port > 65_535) {
    throw new UsageError(`--port must be an integer from 0 to 65535, got ${value}`);
  }
  return port;
}

/** The admission limits from flags, else variables, else defaults; every bad one named. */
function parseAdmission(
  values: Partial<Record<(typeof admissionFlags)[number]['flag'], string>>,
  env: NodeJS.ProcessEnv,
): GuardSettings {
  const settings: GuardSettings = { ...defaultGuardSettings };
  const problems: string[] = [];
  for (const { flag, env: variable, field } of admissionFlags) {
    const fromFlag = values[flag];
    const text = fromFlag ?? (env[variable] === '' ? undefined : env[variable]);
    if (text === undefined) continue;
    const value = Number(text);
    const check = GuardSettingsSchema.shape[field].safeParse(value);
    if (check.success && text.trim() !== '') settings[field] = check.data;
    else {
      const source = fromFlag === undefined ? `$${variable}` : `--${flag}`;
      const maximum = GuardSettingsSchema.shape[field].maxValue;
      problems.push(`${source} must be an integer from 1 to ${maximum}, got ${text}`);
    }
  }
  if (problems.length > 0) throw new UsageError(problems.join('; '));
  return settings;
}

function isPartName(value: string): value is PartName {
  return (partNames as readonly string[]).includes(value);
}
