// Reads a stream up to a byte cap and drains the rest, so a flood is truncated and flagged while
// host memory stays flat and the writer never blocks.
import type { Readable } from 'node:stream';

/** What was kept of a stream. */
export interface CollectedOutput {
  readonly text: string;
  readonly truncated: boolean;
}

/** Collects `stream` until it ends (or `settle` is called), keeping at most `maxBytes`. */
export function collectOutput(
  stream: Readable,
  maxBytes: number,
): { done: Promise<CollectedOutput>; settle: () => void } {
  const chunks: Buffer[] = [];
  let kept = 0;
  let truncated = false;
  let settle = (): void => {};
  const done = new Promise<CollectedOutput>((resolve) => {
    const finish = (): void => {
      stream.off('data', onData);
      resolve({ text: Buffer.concat(chunks, kept).toString('utf8'), truncated });
    };
    const onData = (chunk: Buffer): void => {
      if (kept >= maxBytes) {
        truncated = true;
        return;
      }
      const room = maxBytes - kept;
      const piece = chunk.length > room ? chunk.subarray(0, room) : chunk;
      if (piece !== chunk) truncated = true;
      chunks.push(piece);
      kept += piece.length;
    };
    stream.on('data', onData);
    stream.once('end', finish);
    stream.once('close', finish);
    stream.once('error', finish);
    settle = () => {
      finish();
      stream.destroy();
    };
  });
  return { done, settle };
}
