// The host-side wrapper every Linux run starts as: bash with an empty environment (nothing of the
// caller's, so no LD_PRELOAD or LD_DEBUG_OUTPUT reaches a host-side program), which closes every
// descriptor it inherited beyond the run's own, joins the run's cgroups, then reads its
// instructions (rlimits, then `exec bwrap --args FD`) from a pipe and runs them. A warm launcher
// is this same shell started before its run was asked for.
import { dirname } from 'node:path';
import { shellQuote } from '../process/shell-quote.ts';

/** The environment every host-side helper starts with: none at all. */
export const helperEnvironment: Readonly<Record<string, string>> = Object.freeze({});

/**
 * Descriptor layout of a run: 0-2, the extra pipes, then the seccomp program, the instructions
 * and the start marker.
 */
export interface WrapperDescriptors {
  /** Pipes beyond stdio (the command's fds 3, 4, ...). */
  readonly extraPipes: number;
  /**
   * A pre-started sandbox (prestart-pool.ts) has one more descriptor, after the start marker:
   * the pipe its stub inside the sandbox reads the command from.
   */
  readonly commandPipe?: boolean | undefined;
}

/** The descriptor bwrap reads the seccomp program from. */
export function seccompDescriptor(layout: WrapperDescriptors): number {
  return 3 + layout.extraPipes;
}

/** The descriptor the wrapper reads its instructions (then bwrap its arguments) from. */
export function instructionsDescriptor(layout: WrapperDescriptors): number {
  return 4 + layout.extraPipes;
}

/**
 * The descriptor the last step before the command writes one byte to, then closes: the host
 * reads it as "confinement is set up and the command is being executed". Without that byte a
 * run that exits never started (bubblewrap, setpriv or the view failed), whatever its code.
 */
export function startedDescriptor(layout: WrapperDescriptors): number {
  return 5 + layout.extraPipes;
}

/** Shell that writes the start byte to `fd`, closes it, then becomes the command. */
export function startedSteps(fd: number): string {
  return `printf s >&${fd} && exec ${fd}>&-`;
}

/** The descriptor a pre-started sandbox's stub reads its command from (see commandPipe). */
export function commandDescriptor(layout: WrapperDescriptors): number {
  return 6 + layout.extraPipes;
}

/** How many descriptors the wrapper is spawned with. */
export function wrapperDescriptorCount(layout: WrapperDescriptors): number {
  return 6 + layout.extraPipes + (layout.commandPipe === true ? 1 : 0);
}

/** Shell that closes every descriptor but the layout's own (the loop of both wrappers). */
function closeInherited(layout: WrapperDescriptors): string {
  const keep = Array.from({ length: wrapperDescriptorCount(layout) }, (_, fd) => fd).join(' ');
  // `;` after the loop: closing the descriptor the glob itself used fails, harmlessly.
  return `for f in /proc/$$/fd/*; do n=\${f##*/}; case " ${keep} " in *" $n "*) ;; *) exec {n}<&- ;; esac; done;`;
}

/** `rmdir` of a run's groups (each group and the directory that holds it). */
function removeGroups(procsFiles: readonly string[]): string[] {
  return procsFiles.map((file) => {
    const dir = dirname(file);
    return `rmdir ${shellQuote(dir)} ${shellQuote(dirname(dir))}`;
  });
}

/**
 * The wrapper script; `awaitGroups`: it first waits for a NUL (the host writes it once the
 * groups exist). Instructions end at the first NUL byte (no value can contain one), so
 * `read -d ''` takes exactly them and leaves the rest of the pipe (bwrap's NUL-separated
 * arguments) for bwrap. When the pipe closes without instructions (the host died before handing
 * over a run), the shell moves back to its parent groups and removes the run's.
 */
export function wrapperScript(
  layout: WrapperDescriptors,
  procsFiles: readonly string[],
  awaitGroups = false,
): string {
  const joins = procsFiles.map((file) => `echo $$ > ${shellQuote(file)}`);
  const groups = procsFiles.map((file) => dirname(file));
  const cleanup = `{ ${
    [
      ...groups.map((dir) => `echo $$ > ${shellQuote(`${dirname(dirname(dir))}/cgroup.procs`)}`),
      ...removeGroups(procsFiles),
    ].join('; ') || ':'
  }; } 2>/dev/null`;
  const fd = instructionsDescriptor(layout);
  const run = `if IFS= read -r -d '' line <&${fd}; then eval "$line"; else ${cleanup}; exit 125; fi`;
  const script = [...joins, run].join(' && ');
  if (!awaitGroups) return `${closeInherited(layout)} ${script}`;
  // A pooled launcher is spawned before its groups are made (so that no moment exists in which
  // the host could die leaving groups no process removes): it joins them at the first NUL.
  return `${closeInherited(layout)} if IFS= read -r -d '' go <&${fd}; then ${script}; else ${cleanup}; exit 125; fi`;
}

/**
 * Removes a run's groups, retrying for up to 5 s: bwrap exits as soon as it has its pid 1's
 * status, while that process and its pid namespace may still be leaving the groups. Then the
 * base directories, which only the last run out can remove.
 */
function removeGroupsRetrying(procsFiles: readonly string[]): string {
  if (procsFiles.length === 0) return ':';
  const groups = procsFiles.map((file) => shellQuote(dirname(file)));
  const bases = procsFiles.map((file) => shellQuote(dirname(dirname(file))));
  const gone = groups.map((dir) => `[ ! -d ${dir} ]`).join(' && ');
  return `for ((t = 0; t < 100; t++)); do rmdir ${groups.join(' ')} 2>/dev/null; ${gone} && break; command -p sleep 0.05; done; rmdir ${bases.join(' ')} 2>/dev/null`;
}

/**
 * The wrapper of a pre-started sandbox: `steps` (rlimits, then `exec bwrap --args FD ...`) run
 * in a subshell that joins the run's groups first, so the wrapper itself stays outside them
 * (the run's pids limit counts the same processes as a cold run's) and outlives bwrap. It exits
 * with bwrap's status. When the host died meanwhile (its stub saw the command pipe close), it
 * removes the run's groups, which nobody else would: the host is gone when a byte written to
 * the start descriptor finds no reader (EPIPE, with SIGPIPE ignored only now, so bwrap and the
 * command never inherit that). The parent pid would not say so in time: a dying multi-threaded
 * host keeps its pid until its last thread has exited, well after its descriptors closed.
 * A live host ignores the byte (`h`): only `r` and `s` mean something on that descriptor.
 * The wrapper is spawned before the groups are made, so that no moment exists in which the
 * host could die leaving groups that no process will remove.
 */
export function prestartWrapperScript(
  layout: WrapperDescriptors,
  procsFiles: readonly string[],
  steps: string,
): string {
  const joins = procsFiles.map((file) => `echo $BASHPID > ${shellQuote(file)}`);
  const hostGone = `trap '' PIPE; ! printf h 2>/dev/null >&${startedDescriptor(layout)}`;
  const cleanup = removeGroupsRetrying(procsFiles);
  const run = `(${[...joins, steps].join(' && ')}); s=$?; if ${hostGone}; then ${cleanup}; fi; exit $s`;
  // Started before its groups exist: it goes on once the host wrote a NUL on the `--args`
  // descriptor (the groups are made by then); a pipe closed before that (the host died while
  // making them) means it removes whatever of them exists.
  const go = `IFS= read -r -d '' go <&${instructionsDescriptor(layout)}`;
  return `${closeInherited(layout)} if ${go}; then ${run}; else ${cleanup}; exit 125; fi`;
}
