// Which backend confined a run, and the order of the Linux backends from strongest to weakest:
// the probe tries them in this order, and `minimumConfinement` names the weakest one a policy
// accepts.

/** Linux backends, strongest first (see docs/subprocess.md for what each one enforces). */
export const linuxBackends = ['bubblewrap', 'bubblewrap-as-caller', 'landlock', 'rlimits'] as const;

/**
 * One Linux backend. `bubblewrap`: namespaces, the declared view and seccomp, the command
 * running as an unprivileged identity. `bubblewrap-as-caller`: the same, the command keeping the
 * caller's uid (a root host whose user namespace maps one uid, or `runAs: 'host'`).
 * `landlock`: no namespace; Landlock file-system (and TCP, scope) rules, seccomp, rlimits,
 * a new session. `rlimits`: resource limits, a clean environment and nothing else.
 */
export type LinuxBackend = (typeof linuxBackends)[number];

/**
 * What confined a run: a {@link LinuxBackend}, `seatbelt` (macOS), `job-object` (Windows), or
 * `none` when the policy disabled confinement or the command never started.
 */
export type Confinement = LinuxBackend | 'seatbelt' | 'job-object' | 'none';

/** Whether `backend` is at least as strong as `minimum`. */
export function meetsMinimum(backend: LinuxBackend, minimum: LinuxBackend): boolean {
  return linuxBackends.indexOf(backend) <= linuxBackends.indexOf(minimum);
}
