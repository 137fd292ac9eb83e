// What the test files share: reading a refusal.
import { isSandboxError, type SandboxError } from '@coda/sandbox-core';

/** The error a promise rejected with, as a SandboxError (fails the test if it resolved). */
export async function refusal(promise: Promise<unknown>): Promise<SandboxError> {
  const error = await promise.then(
    () => undefined,
    (reason: unknown) => reason,
  );
  if (!isSandboxError(error)) throw new Error(`expected a SandboxError, got ${String(error)}`);
  return error;
}

/**
 * Asks `guard` for a lease, gives it back at once if granted, and says whether it was granted and
 * what the acquisition ended with (the lease, or the error it rejected with).
 */
export async function probeLease(
  guard: { acquire(context: object): Promise<{ release(): Promise<void> }> },
  context: object,
): Promise<{ admitted: boolean; outcome: unknown }> {
  let lease: { release(): Promise<void> } | undefined;
  try {
    lease = await guard.acquire(context);
  } catch (error) {
    return { admitted: false, outcome: error };
  }
  await lease.release();
  return { admitted: true, outcome: lease };
}
