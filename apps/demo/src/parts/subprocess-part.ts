// Part 3: commands under a restrictive OS sandbox policy, with the controls that applied on this
// machine — and, where bubblewrap or cgroups are missing, what degraded.
import { existsSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { isSandboxError, type JsonObject } from '@coda/sandbox-core';
import {
  defaultSubprocessPolicy,
  degradedWarning,
  SandboxControl,
  type SandboxResult,
} from '@coda/sandbox-subprocess';
import { formatMs, truncate } from '../cli/format.ts';
import type { Reporter } from '../cli/reporter.ts';
import { restrictivePolicy } from '../compose/subprocess-sandbox.ts';
import { connectScript, listenOnLoopback } from '../sample-data/loopback-listener.ts';
import { type DemoPart, partReport } from './part.ts';

/** Controls full confinement brings on Linux; the ones missing from a result degraded. */
const fullConfinement: readonly string[] = [
  SandboxControl.bubblewrap,
  SandboxControl.networkNamespace,
  SandboxControl.pidNamespace,
  SandboxControl.filesystemView,
  SandboxControl.noFileWrites,
  SandboxControl.seccomp,
  SandboxControl.seccompNoInet,
  SandboxControl.capabilitiesDropped,
  SandboxControl.cleanEnvironment,
  SandboxControl.wallClockTimeout,
];

/** Outside anything the policy allows; per process, so parallel runs never see each other's. */
const forbiddenFile = `/var/tmp/coda-demo-${process.pid}-was-here`;

/** One command and what must hold for it. */
interface Check {
  label: string;
  run(): Promise<SandboxResult>;
  holds(result: SandboxResult): boolean;
  /** Holds only under OS confinement (bubblewrap): without it this is a degradation, not a bug. */
  needsConfinement: boolean;
}

export const subprocessPart: DemoPart = {
  name: 'subprocess',
  title: 'Subprocess sandbox',
  summary: `Commands under a restrictive policy: ${JSON.stringify(restrictivePolicy)}.`,
  async run(reporter, resources) {
    const sandbox = resources.subprocessSandbox();
    const listener = await listenOnLoopback();
    const runs: JsonObject[] = [];
    let failed = 0;
    const checks: Check[] = [
      {
        label: 'uname -sr',
        run: () => sandbox.exec('uname -sr'),
        holds: (result) => result.success,
        needsConfinement: false,
      },
      {
        label: 'env (the host has secrets; the command must not see them)',
        run: () => sandbox.exec('env'),
        holds: (result) => onlyAllowedVariables(result.stdout),
        needsConfinement: false,
      },
      {
        label: `touch ${forbiddenFile}`,
        run: () => sandbox.exec(`touch ${forbiddenFile}`),
        holds: (result) => !result.success && !existsSync(forbiddenFile),
        needsConfinement: true,
      },
      {
        label: `node: connect to the host's 127.0.0.1:${listener.port}`,
        run: () => sandbox.run(process.execPath, ['-e', connectScript(listener.port)]),
        holds: (result) => !result.success && listener.connections === 0,
        needsConfinement: true,
      },
    ];
    try {
      for (const check of checks) {
        const refused = await startOrRefusal(check);
        if (typeof refused === 'string') {
          // The sandbox refused to start it here (under Landlock a program must be reachable by
          // the run's identity through its real parents): nothing ran, nothing was shown.
          describeRefusal(reporter, check.label, refused);
          runs.push({
            command: check.label,
            held: false,
            degraded: true,
            notRun: refused,
            sandboxApplied: false,
          });
          continue;
        }
        const result = refused;
        const held = check.holds(result);
        const degraded = !held && check.needsConfinement && !result.sandboxApplied;
        if (!held && !degraded) failed++;
        describe(reporter, check.label, result, held ? 'held' : degraded ? 'degraded' : 'failed');
        runs.push({ command: check.label, held, degraded, ...summarise(result) });
      }
    } finally {
      await listener.close();
      // Only a degraded run can have written it; leave the host as it was.
      await rm(forbiddenFile, { force: true });
    }
    const last = runs.at(-1);
    const { confinement, reason } = sandbox.capabilities();
    showBackend(reporter, confinement, reason);
    showControls(
      reporter,
      (last?.controls as string[] | undefined) ?? [],
      last?.sandboxApplied === true,
      confinement,
    );
    return partReport('subprocess', failed, 'commands were not confined as expected', runs);
  },
};

/** The check's result, or why the sandbox refused to start it (an option it cannot honour here). */
async function startOrRefusal(check: Check): Promise<SandboxResult | string> {
  try {
    return await check.run();
  } catch (error) {
    if (isSandboxError(error)) return error.message;
    throw error;
  }
}

function describeRefusal(reporter: Reporter, label: string, reason: string): void {
  const { style } = reporter;
  reporter.line(`  ${style.yellow('~ not run here:')} ${style.bold(label)}`);
  reporter.line(`      ${truncate(reason, 160)}`);
}

/** Whether every variable in `env` output is one the policy lets through (plus the cwd). */
function onlyAllowedVariables(output: string): boolean {
  // The policy's variables (restrictivePolicy keeps the default list), the private HOME, plus
  // what the shell sets.
  const allowed = new Set([...defaultSubprocessPolicy.allowedEnv, 'HOME', 'PWD', 'SHLVL', '_']);
  const names = output
    .split('\n')
    .filter(Boolean)
    .map((line) => line.split('=')[0] ?? '');
  return names.every((name) => allowed.has(name));
}

function describe(
  reporter: Reporter,
  label: string,
  result: SandboxResult,
  verdict: 'held' | 'degraded' | 'failed',
): void {
  const { style } = reporter;
  const mark = {
    held: style.green('✓'),
    degraded: style.yellow('~ degraded:'),
    failed: style.red('✗'),
  }[verdict];
  const output = (result.stdout.trim() || result.stderr.trim() || result.error || '').split('\n');
  const shown =
    output.length > 1 ? `${output.length} lines: ${output.join(' ')}` : (output[0] ?? '');
  reporter.line(`  ${mark} ${style.bold(label)} ${style.dim(`(${formatMs(result.durationMs)})`)}`);
  reporter.line(
    `      ${result.success ? 'exit 0' : (result.error ?? 'failed')}: ${truncate(shown, 100)}`,
  );
}

/** Which backend the probe chose on this machine, and why no stronger one. */
function showBackend(reporter: Reporter, confinement: string, reason: string | undefined): void {
  const { style } = reporter;
  reporter.line();
  const strongest = confinement === 'bubblewrap';
  reporter.line(
    `  backend: ${strongest ? style.green(confinement) : style.yellow(confinement)}` +
      (reason === undefined ? ' (the strongest: bubblewrap works here)' : ''),
  );
  if (reason !== undefined) reporter.line(style.yellow(`  why not a stronger one: ${reason}`));
}

function showControls(
  reporter: Reporter,
  controls: readonly string[],
  applied: boolean,
  confinement: string,
): void {
  const { style } = reporter;
  reporter.line(`  sandboxApplied: ${applied ? style.green('yes') : style.yellow('no')}`);
  reporter.line(`  controls enforced here: ${controls.join(', ')}`);
  const missing = fullConfinement.filter((control) => !controls.includes(control));
  if (missing.length > 0) {
    reporter.line(
      style.yellow(
        `  degraded: ${confinement === 'landlock' ? 'bubblewrap cannot run here; Landlock and seccomp confine commands instead' : degradedWarning}`,
      ),
    );
    reporter.line(style.yellow(`  missing on this machine: ${missing.join(', ')}`));
  }
}

function summarise(result: SandboxResult): JsonObject {
  return {
    success: result.success,
    exitCode: result.exitCode,
    timedOut: result.timedOut,
    durationMs: Math.round(result.durationMs),
    sandboxApplied: result.sandboxApplied,
    confinement: result.confinement,
    controls: [...result.controls],
    ...(result.error === undefined ? {} : { error: result.error }),
  };
}
