// The limits the host enforces itself while a call runs, whichever kind of child serves it: the
// wall clock, the caller's cancellation, the host closing, and (without a memory cgroup) the
// resident memory of the child and everything it started.
import type { ParserLimits } from '@coda/sandbox-core';
import type { ConfinementReport } from '../spawn/child.ts';
import type { KillReason } from './classify.ts';
import { watchMemory } from './memory-watch.ts';

/** What one call needs watched. */
export interface WatchedCall {
  limits: ParserLimits;
  signal: AbortSignal | undefined;
  /** Aborted when the host closes. */
  closing: AbortSignal;
}

/**
 * Calls `kill` with the reason once a limit is passed (or the call is cancelled); `pid` is the
 * process whose tree the memory watchdog sums. Returns the function that stops watching.
 */
export function watchCall(
  call: WatchedCall,
  child: { pid: number | undefined; confinement: ConfinementReport },
  kill: (reason: KillReason) => void,
): () => void {
  const timer = setTimeout(() => kill({ kind: 'timeout' }), call.limits.timeout);
  const onAbort = (): void => kill({ kind: 'cancelled', message: 'parser call cancelled' });
  const onClose = (): void => kill({ kind: 'cancelled', message: 'parser host closed' });
  call.signal?.addEventListener('abort', onAbort, { once: true });
  call.closing.addEventListener('abort', onClose, { once: true });
  if (call.signal?.aborted) onAbort();
  if (call.closing.aborted) onClose();
  const stopWatch =
    child.confinement.memory === 'rss-watchdog' && child.pid !== undefined
      ? watchMemory(child.pid, call.limits.memoryBytes, (residentBytes) =>
          kill({ kind: 'memory', residentBytes }),
        )
      : () => {};
  return () => {
    clearTimeout(timer);
    stopWatch();
    call.signal?.removeEventListener('abort', onAbort);
    call.closing.removeEventListener('abort', onClose);
  };
}
