import { Writable } from 'node:stream';
import { stripVTControlCharacters } from 'node:util';
import { describe, expect, it } from 'vitest';
import { createServerLogger } from './server-logger.ts';

/** A stream that keeps what is written, a terminal or not. */
function capture(isTTY: boolean) {
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

describe('createServerLogger', () => {
  it('writes one JSON line per entry when the stream is not a terminal', () => {
    const out = capture(false);
    createServerLogger(out.stream).warn({ code: 'RATE_LIMITED', userId: 'ana' }, 'request refused');
    const line = JSON.parse(out.text()) as Record<string, unknown>;
    expect(line).toMatchObject({
      level: 40,
      code: 'RATE_LIMITED',
      userId: 'ana',
      msg: 'request refused',
    });
  });

  it('writes pino-pretty lines on a terminal', async () => {
    const out = capture(true);
    createServerLogger(out.stream).warn({ code: 'RATE_LIMITED' }, 'request refused');
    await new Promise((resolve) => setImmediate(resolve));
    const text = stripVTControlCharacters(out.text());
    expect(text).toMatch(/^\[[\d:.]+\] WARN: request refused\n {4}code: "RATE_LIMITED"\n$/);
  });
});
