// Waiting, briefly, for a child's channels to deliver what it wrote before it exited.
import { once } from 'node:events';
import type { Readable } from 'node:stream';

/** How long to wait for the channels to drain after the child exited. */
export const drainGraceMs = 1_000;

/** Resolves once every stream has closed, or after {@link drainGraceMs}. */
export async function streamsClosed(streams: readonly Readable[]): Promise<void> {
  const open = streams.filter((stream) => !stream.readableEnded && !stream.destroyed);
  if (open.length === 0) return;
  const grace = AbortSignal.timeout(drainGraceMs);
  await Promise.all(open.map((stream) => once(stream, 'close', { signal: grace }).catch(() => {})));
}
