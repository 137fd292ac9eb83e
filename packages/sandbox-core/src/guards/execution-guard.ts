// How tier 3 and 4 limits (and any other admission rule) plug into a runner without the runner
// importing what enforces them (Redis, a database, a quota service).
import { z } from 'zod';
import { SandboxUnavailableError } from '../errors/error-classes.ts';
import { isSandboxError } from '../errors/sandbox-error.ts';

const identifier = z.string().min(1).max(65_536);

/** Who runs an execution and where: what guards key their limits on. */
export const ExecutionContextSchema = z.strictObject({
  /** Unique per execution; a retry of the same execution keeps it (so a budget counts it once). */
  executionId: identifier,
  userId: identifier.optional(),
  conversationId: identifier.optional(),
  turnId: identifier.optional(),
});

/**
 * Who runs an execution and where: what guards key their limits on ({@link ExecutionContextSchema}).
 * Each identifier is 1 to 65 536 characters.
 */
export interface ExecutionContext {
  /** Unique per execution; a retry of the same execution keeps it (so a budget counts it once). */
  executionId: string;
  /** The user the execution runs for: the key of per-user rate limits and concurrency caps. */
  userId?: string | undefined;
  /** The conversation the execution belongs to. */
  conversationId?: string | undefined;
  /** The conversation turn the execution belongs to: the key of per-turn budgets. */
  turnId?: string | undefined;
}

/** What a guard hands out on admission; released when the execution ends. */
export interface GuardLease {
  /** Gives back what was acquired (a concurrency slot). Never throws; safe to call twice. */
  release(): Promise<void>;
}

/**
 * An admission rule checked before an execution starts. `acquire` resolves with a lease when
 * the execution may run, or rejects with a `SandboxError` whose code says why not
 * (`RATE_LIMITED`, `BUDGET_EXHAUSTED`, `UNAVAILABLE`), with `details.retryAfterMs` when known.
 */
export interface ExecutionGuard {
  /** Names the guard in logs and error details. */
  readonly name: string;
  /**
   * Admits the execution (resolving with a lease to release when it ends) or refuses it
   * (rejecting with a `SandboxError`). Aborting `signal` gives up waiting.
   */
  acquire(context: ExecutionContext, signal?: AbortSignal): Promise<GuardLease>;
}

/**
 * Acquires every guard in order, for runners. If one refuses, the leases already taken are
 * released and its error is rethrown; a guard that fails with anything but a `SandboxError`
 * refuses with `UNAVAILABLE` (fail closed). Resolves with one lease that releases them all.
 */
export async function acquireGuards(
  guards: readonly ExecutionGuard[],
  context: ExecutionContext,
  signal?: AbortSignal,
): Promise<GuardLease> {
  const leases: GuardLease[] = [];
  const releaseAll = async () => {
    const taken = leases.splice(0).reverse();
    await Promise.allSettled(taken.map((lease) => lease.release()));
  };
  for (const guard of guards) {
    try {
      leases.push(await guard.acquire(context, signal));
    } catch (error) {
      await releaseAll();
      if (isSandboxError(error)) throw error;
      throw new SandboxUnavailableError(`Guard ${guard.name} failed: ${messageOf(error)}`, {
        cause: error,
        details: { guard: guard.name },
      });
    }
  }
  return { release: releaseAll };
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
