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
