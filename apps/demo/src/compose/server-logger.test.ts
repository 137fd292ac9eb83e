import { stripVTControlCharacters } from 'node:util';
import { describe, expect, it } from 'vitest';
import { captureStream } from '../../test/helpers/captured-stream.ts';
import { createServerLogger } from './server-logger.ts';

describe('createServerLogger', () => {
  it('writes one JSON line per entry when the stream is not a terminal', () => {
    const out = captureStream(false);
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
    const out = captureStream(true);
    createServerLogger(out.stream).warn({ code: 'RATE_LIMITED' }, 'request refused');
    await new Promise((resolve) => setImmediate(resolve));
    const text = stripVTControlCharacters(out.text());
    expect(text).toMatch(/^\[[\d:.]+\] WARN: request refused\n {4}code: "RATE_LIMITED"\n$/);
  });
});
