// The last step of every bubblewrap run, cold or pre-started: the command's environment set by
// GNU env, not by bash. bash treats some names as its own (UID and EUID read-only, SHLVL and
// OLDPWD rewritten, BASH_ENV sourced, POSIXLY_CORRECT switching modes), so a command exported
// by bash saw `UID=65534` and a 'readonly variable' line where its caller passed `UID=7` (found
// by an attack review). bash, the step before, holds each variable under a prefix (inert to it
// and to ld.so) and only names them; env builds the command's environment from scratch.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';

/** GNU coreutils env, from a fixed system directory (it is in every view: /usr is). */
export const envPath = ['/usr/bin/env', '/bin/env'].find((path) => existsSync(path));

let splitChecked: boolean | undefined;

/**
 * Whether {@link envPath} expands `${NAME}` in a `-S` string (GNU coreutils 8.30 and later;
 * busybox's env has no `-S`). Checked once per process, by running it.
 */
export function envExpandsSplitStrings(): boolean {
  splitChecked ??=
    envPath !== undefined &&
    spawnSync(envPath, ['-i', '-S', `A=\${${heldVariablePrefix}A}`, envPath], {
      env: { [`${heldVariablePrefix}A`]: 'a b\nc' },
      encoding: 'utf8',
    }).stdout === 'A=a b\nc\n';
  return splitChecked;
}

/**
 * The prefix under which bash holds the command's variables until env sets them: a caller's
 * `NAME` is `CODA_SANDBOX_ENV_NAME` there.
 */
export const heldVariablePrefix = 'CODA_SANDBOX_ENV_';

/**
 * bash that ends in `exec env -i -S '...' "$@"`: env's `-S` string names each held variable,
 * `NAME=${CODA_SANDBOX_ENV_NAME}`, and env expands it from its own environment while parsing
 * its options, then drops that environment (`-i`). Each value arrives byte for byte (expanded
 * inside one argument, never re-split or unescaped) and none is on a command line: env's
 * /proc/PID/cmdline shows the names only. `before` runs first (the start byte); names given by
 * the caller match `[A-Za-z_][A-Za-z0-9_]*`, so a `-S` string of them is plain words.
 */
export function exactEnvironmentExec(before: string): string {
  return [
    'coda_pairs=',
    `for coda_name in "\${!${heldVariablePrefix}@}"; do coda_pairs+="\${coda_name#${heldVariablePrefix}}=\\\${\${coda_name}} "; done`,
    `${before} && exec ${envPath ?? '/usr/bin/env'} -i -S "$coda_pairs" "$@"`,
  ].join('; ');
}

/** GNU coreutils nice, which only execs its command when asked for no change (`-n 0`). */
const nicePath = ['/usr/bin/nice', '/bin/nice'].find((path) => existsSync(path));

/**
 * `command` as env can run it: env takes every leading argument with an `=` for a variable, so
 * a program whose path has one (`/opt/a=b/tool`) goes behind `nice -n 0 --`, which changes
 * nothing (the niceness it sets is the current one) and execs it with its argv as given.
 */
export function envRunnable(command: readonly string[]): readonly string[] {
  if (!(command[0] ?? '').includes('=') || nicePath === undefined) return command;
  return [nicePath, '-n', '0', '--', ...command];
}
