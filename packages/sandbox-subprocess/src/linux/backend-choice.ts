// Which Linux backend runs a command, chosen by probing what works here, strongest first:
// bubblewrap with the unprivileged identity, bubblewrap as the caller, Landlock + seccomp, then
// rlimits only. Each probe runs once per process (detect.ts, landlock-probe.ts); the policy then
// refuses what is below its minimum, with every reason on the way down.
import { SandboxUnavailableError } from '@coda/sandbox-core';
import { type LinuxBackend, meetsMinimum } from '../process/confinement.ts';
import type { LaunchRequest } from '../process/launch-plan.ts';
import { detectLinux, type LinuxSupport } from './detect.ts';
import { detectLandlock } from './landlock/landlock-probe.ts';
import { type Identity, runIdentity } from './linux-plan.ts';

/** The backend a run gets, with what it needs. */
export interface BackendChoice {
  readonly backend: LinuxBackend;
  /** Who the command runs as (as the caller's uid where the drop cannot work here). */
  readonly identity: Identity;
  /** The bubblewrap support of the mode chosen (also the reason text when bubblewrap is not used). */
  readonly bwrap: LinuxSupport;
  /** Landlock's ABI version, for the Landlock backend. */
  readonly landlockAbi: number | undefined;
  /** Why each stronger backend is not used, in order. */
  readonly reasons: readonly string[];
}

/** Chooses the backend for `policy` (probing on first use). */
export function chooseBackend(
  policy: Pick<LaunchRequest['policy'], 'runAs'>,
  hostPath: string | undefined,
): BackendChoice {
  const wanted = runIdentity(policy);
  const reasons: string[] = [];
  const unprivileged = detectLinux(hostPath);
  if (wanted.kind !== 'host') {
    if (unprivileged.bwrap !== undefined) {
      return {
        backend: 'bubblewrap',
        identity: wanted,
        bwrap: unprivileged,
        landlockAbi: undefined,
        reasons,
      };
    }
    reasons.push(`bubblewrap: ${unprivileged.reason}`);
  }
  let bwrap = unprivileged;
  if (process.getuid?.() === 0) {
    const caller = detectLinux(hostPath, 'caller');
    bwrap = caller;
    if (caller.bwrap !== undefined) {
      return {
        backend: 'bubblewrap-as-caller',
        identity: { kind: 'host' },
        bwrap: caller,
        landlockAbi: undefined,
        reasons,
      };
    }
    reasons.push(`bubblewrap as the caller: ${caller.reason}`);
  }
  const landlock = detectLandlock();
  if (landlock.abi !== undefined) {
    const identity: Identity =
      wanted.kind === 'drop' && !landlock.dropWorks ? { kind: 'host' } : wanted;
    return { backend: 'landlock', identity, bwrap, landlockAbi: landlock.abi, reasons };
  }
  reasons.push(`landlock: ${landlock.reason}`);
  return { backend: 'rlimits', identity: wanted, bwrap, landlockAbi: undefined, reasons };
}

/**
 * Throws `SandboxUnavailableError` when `choice` is below what the policy accepts: `strict`
 * needs a bubblewrap backend, `minimumConfinement` names the weakest backend accepted.
 */
export function refuseBelowMinimum(choice: BackendChoice, policy: LaunchRequest['policy']): void {
  const why = choice.reasons.join('; ');
  if (policy.strict && !meetsMinimum(choice.backend, 'bubblewrap-as-caller')) {
    // The wording of a strict refusal without any confinement is the one it always had.
    const message =
      choice.backend === 'rlimits'
        ? `Refusing to run unconfined (strict policy): ${choice.bwrap.reason}`
        : `Refusing to run under ${choice.backend} (strict policy needs bubblewrap): ${why}`;
    throw new SandboxUnavailableError(message, {
      details: {
        reason: why,
        confinement: choice.backend,
        minimumConfinement: 'bubblewrap-as-caller',
      },
    });
  }
  const minimum = policy.minimumConfinement;
  if (meetsMinimum(choice.backend, minimum)) return;
  throw new SandboxUnavailableError(
    `Refusing to run: the strongest confinement here is ${choice.backend}, below minimumConfinement "${minimum}" (${why}). Set minimumConfinement: '${choice.backend}' to accept it${choice.backend === 'rlimits' ? ' (resource limits only: the command sees the whole file system and network)' : ''}.`,
    {
      details: {
        reason: why,
        confinement: choice.backend,
        minimumConfinement: minimum,
      },
    },
  );
}
