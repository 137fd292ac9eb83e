// A writable stream that keeps what is written, posing as a terminal or not: what the reporter
// and the logger decide on (`isTTY`) without a real terminal.
import { Writable } from 'node:stream';

/** The stream and the text written to it so far. */
export function captureStream(isTTY: boolean) {
  const chunks: string[] = [];
  const stream = Object.assign(
    new Writable({
      write(chunk: Buffer, _encoding, done) {
        chunks.push(chunk.toString('utf8'));
        done();
      },
    }),
    { isTTY },
  );
  return { stream, text: () => chunks.join('') };
}
