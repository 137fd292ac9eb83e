// `pnpm demo`: the guided run of every layer, one part of it, or `serve`. Exit code 0 when
// every part ran and every attack was contained, 1 otherwise, 2 on bad usage.
import { parseDemoArgs, UsageError, usage } from './cli/args.ts';
import { createSilentReporter, createTerminalReporter } from './cli/reporter.ts';
import { runParts } from './cli/run-parts.ts';
import { serve } from './cli/serve.ts';
import { colourEnabled, createStyle } from './cli/style.ts';

async function main(argv: readonly string[]): Promise<number> {
  let command: ReturnType<typeof parseDemoArgs>;
  try {
    command = parseDemoArgs(argv);
  } catch (error) {
    if (!(error instanceof UsageError)) throw error;
    console.error(`${error.message}\n\n${usage}`);
    return 2;
  }
  if (command.kind === 'help') {
    console.log(usage);
    return 0;
  }
  const style = createStyle(!('json' in command && command.json) && colourEnabled(process.stdout));
  if (command.kind === 'serve') return serve(command, style);

  const reporter = command.json
    ? createSilentReporter(style)
    : createTerminalReporter(process.stdout, style);
  if (!command.json) {
    console.log(style.bold('Coda Sandbox — every layer, live, on this machine'));
  }
  const summary = await runParts(command.parts, reporter);
  if (command.json) {
    console.log(JSON.stringify(summary, null, 2));
  } else {
    const { total, contained } = summary.attacks;
    console.log();
    const attacks = total > 0 ? `${contained}/${total} attacks contained; ` : '';
    console.log(
      summary.ok
        ? style.green(style.bold(`✓ ${attacks}every part ran as expected.`))
        : style.red(style.bold(`✗ ${attacks}see the parts marked ✗ above.`)),
    );
  }
  return summary.ok ? 0 : 1;
}

// Anything that escapes (a Redis that does not answer `serve`) is one line, not a stack trace.
process.exitCode = await main(process.argv.slice(2)).catch((error: unknown) => {
  console.error(error instanceof Error ? error.message : String(error));
  return 1;
});
