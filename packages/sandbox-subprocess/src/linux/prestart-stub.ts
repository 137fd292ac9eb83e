// The last step inside a pre-started sandbox (prestart-pool.ts): a bash that bubblewrap started
// (after setpriv, when the host is root: so it is already unprivileged) and that waits for the
// run's command on a pipe. The command, its environment and its cwd arrive only there, never on
// a command line, and only after every privileged step is over, as in a cold run (linux-plan.ts,
// where bash holds the environment as CODA_SANDBOX_ENV_* past setpriv and env sets it).
import { exactEnvironmentExec, heldVariablePrefix } from './exact-environment.ts';
import { startedSteps } from './wrapper-shell.ts';

/**
 * The prefix of the variables that carry a dropped identity's environment past setpriv (and
 * that the stub holds the command's variables under, see exact-environment.ts). Every name with
 * it is refused in a dropped identity's environment and keeps a run of any identity on the cold
 * path.
 */
export const stubVariablePrefix = heldVariablePrefix;

/** The largest CPU limit the stub takes: 16 digits, below 2^53 (a JS integer) and bash's 2^63. */
const cpuPattern = '^[1-9][0-9]{0,15}$';
/** A `NAME=value` entry as the host validated it (names as zod's `envName`). */
const entryPattern = '^[A-Za-z_][A-Za-z0-9_]*=';

/**
 * The stub: checks that its bash can read NUL-separated fields (`mapfile -d`, bash 4.4) before
 * it says it is ready (`r` on the start descriptor `startFd`), reads the message from
 * `commandFd` to its end and closes it, sets the run's own CPU limit when `cpu` (see
 * {@link commandMessage}; the pre-started sandbox has none, so that its key does not depend on
 * the value, and an unprivileged process can always lower one), enters the cwd, holds the
 * environment under {@link stubVariablePrefix}, writes the start byte and closes that
 * descriptor too, then becomes the command through env (exact-environment.ts). A pipe closed
 * without a message (the host went away or discarded the sandbox), or a field it does not take
 * (a CPU limit that is not a positive integer of at most 16 digits, an entry that is not
 * `NAME=value`), ends it with 125 and no start byte: the run fails `UNAVAILABLE`, never runs
 * without its limit.
 */
export function stubScript(startFd: number, commandFd: number, cpu: boolean): string {
  const first = cpu ? 1 : 0; // index of the cwd
  return [
    `mapfile -d '' coda_fields </dev/null || exit 125`,
    `printf r >&${startFd} || exit 125`,
    `mapfile -d '' -u ${commandFd} coda_fields`,
    `exec ${commandFd}<&-`,
    `[ "\${#coda_fields[@]}" -ge ${first + 3} ] || exit 125`,
    ...(cpu
      ? [
          `[[ "\${coda_fields[0]}" =~ ${cpuPattern} ]] || exit 125`,
          // Soft first, as a cold run's wrapper does (ulimit.ts); the hard one a second above.
          `ulimit -S -t "\${coda_fields[0]}" && ulimit -H -t "$((coda_fields[0] + 1))" || exit 125`,
        ]
      : []),
    `cd -- "\${coda_fields[${first}]}" || exit 126`,
    `[[ "\${coda_fields[${first + 1}]}" =~ ^[0-9]+$ ]] || exit 125`,
    `for ((coda_index = ${first + 2}; coda_index < ${first + 2} + coda_fields[${first + 1}]; coda_index++)); do [[ "\${coda_fields[coda_index]}" =~ ${entryPattern} ]] || exit 125; export "${heldVariablePrefix}\${coda_fields[coda_index]}"; done`,
    `set -- "\${coda_fields[@]:coda_index}"`,
    '[ "$#" -ge 1 ] || exit 125',
    'unset coda_fields coda_index',
    exactEnvironmentExec(startedSteps(startFd)),
  ].join('; ');
}

/**
 * What the stub reads: the run's CPU seconds when it has a CPU limit (`cpuSecs`, else
 * undefined and no field), the cwd, the number of variables, `NAME=value` each, then the argv.
 */
export function commandMessage(
  cpuSecs: number | undefined,
  cwd: string,
  env: Readonly<Record<string, string>>,
  argv: readonly string[],
): Buffer {
  const entries = Object.entries(env).map(([name, value]) => `${name}=${value}`);
  const cpu = cpuSecs === undefined ? [] : [String(cpuSecs)];
  return Buffer.from(
    [...cpu, cwd, String(entries.length), ...entries, ...argv].map((f) => `${f}\0`).join(''),
  );
}
