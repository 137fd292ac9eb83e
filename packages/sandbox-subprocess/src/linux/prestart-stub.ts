// The last step inside a pre-started sandbox (prestart-pool.ts): a bash that bubblewrap started
// (after setpriv, when the host is root: so it is already unprivileged) and that waits for the
// run's command on a pipe. The command, its environment and its cwd arrive only there, never on
// a command line, and only after every privileged step is over, as in a cold run (linux-plan.ts,
// where bash restores the environment from CODA_SANDBOX_ENV_* after setpriv).
import { startedSteps } from './wrapper-shell.ts';

/**
 * The stub's own variables. Every name with this prefix is refused in a dropped identity's
 * environment and keeps a run of any identity on the cold path, so unsetting them removes
 * nothing of the caller's.
 */
export const stubVariablePrefix = 'CODA_SANDBOX_ENV_';

/**
 * Variables bash sets or reads itself (bash 5: read-only, dynamic, reset at start-up, or with a
 * meaning to the shell). Exported by the stub they reach the command changed (`UID`, `SHLVL`,
 * `RANDOM`), as the stub's own (`BASH_COMMAND`) or not at all (`GROUPS`, `OLDPWD`, `PS1`), and
 * `POSIXLY_CORRECT` before a read-only one ends the stub; a cold run's shell, which gets the
 * environment at its start, treats each otherwise. An attack review compared the two name by
 * name: a run whose environment names one starts cold, so it gets the cold run's result.
 */
export const bashOwnVariables: ReadonlySet<string> = new Set([
  ...['BASH', 'BASHOPTS', 'BASHPID', 'BASH_ALIASES', 'BASH_ARGC', 'BASH_ARGV', 'BASH_ARGV0'],
  ...['BASH_CMDS', 'BASH_COMMAND', 'BASH_COMPAT', 'BASH_ENV', 'BASH_EXECUTION_STRING'],
  ...['BASH_LINENO', 'BASH_LOADABLES_PATH', 'BASH_REMATCH', 'BASH_SOURCE', 'BASH_SUBSHELL'],
  ...['BASH_VERSINFO', 'BASH_VERSION', 'BASH_XTRACEFD', 'COMP_WORDBREAKS', 'DIRSTACK'],
  ...['ENV', 'EPOCHREALTIME', 'EPOCHSECONDS', 'EUID', 'FUNCNAME', 'FUNCNEST', 'GLOBIGNORE'],
  ...['GROUPS', 'HISTCMD', 'IFS', 'LINENO', 'OLDPWD', 'OPTERR', 'OPTIND', 'PIPESTATUS'],
  ...['POSIXLY_CORRECT', 'PPID', 'PS1', 'PS2', 'PS4', 'RANDOM', 'SECONDS', 'SHELLOPTS'],
  ...['SHLVL', 'SRANDOM', 'UID', '_'],
]);

const fields = stubVariablePrefix;
const index = `${stubVariablePrefix}i`;

/**
 * The stub: checks that its bash can read NUL-separated fields (`mapfile -d`, bash 4.4) before
 * it says it is ready (`r` on the start descriptor `startFd`), reads the message from
 * `commandFd` to its end and closes it, enters the cwd, exports the environment, writes the
 * start byte and closes that descriptor too, then becomes the command. A pipe closed without a
 * message (the host went away or discarded the sandbox) ends it with 125 and no start byte.
 */
export function stubScript(startFd: number, commandFd: number): string {
  return [
    `mapfile -d '' ${fields} </dev/null || exit 125`,
    `printf r >&${startFd} || exit 125`,
    `mapfile -d '' -u ${commandFd} ${fields}`,
    `exec ${commandFd}<&-`,
    `[ "\${#${fields}[@]}" -ge 3 ] || exit 125`,
    `cd -- "\${${fields}[0]}" || exit 126`,
    'unset OLDPWD', // set by `cd`; not the command's
    `for ((${index} = 2; ${index} < 2 + ${fields}[1]; ${index}++)); do export "\${${fields}[${index}]}"; done`,
    `set -- "\${${fields}[@]:${index}}"`,
    `unset ${fields} ${index}`,
    `${startedSteps(startFd)} && exec -- "$@"`,
  ].join('; ');
}

/** What the stub reads: the cwd, the number of variables, `NAME=value` each, then the argv. */
export function commandMessage(
  cwd: string,
  env: Readonly<Record<string, string>>,
  argv: readonly string[],
): Buffer {
  const entries = Object.entries(env).map(([name, value]) => `${name}=${value}`);
  return Buffer.from(
    [cwd, String(entries.length), ...entries, ...argv].map((f) => `${f}\0`).join(''),
  );
}
