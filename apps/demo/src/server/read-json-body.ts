// Reads a request body as JSON with a byte cap: refused from Content-Length before reading when
// possible, else as soon as the running count passes the cap, so a large upload never sits in
// memory.
import type { IncomingMessage } from 'node:http';
import { HttpError } from './http-error.ts';

/**
 * Reads and parses the body of `request`. Throws an {@link HttpError}: 415 unless the content
 * type is JSON, 413 past `maxBytes`, 400 for malformed JSON.
 */
export async function readJsonBody(request: IncomingMessage, maxBytes: number): Promise<unknown> {
  const type = request.headers['content-type'] ?? '';
  if (!/^application\/json\s*(;|$)/i.test(type)) {
    throw new HttpError(415, {
      code: 'UNSUPPORTED_MEDIA_TYPE',
      message: 'Send the body as application/json',
    });
  }
  const declared = Number(request.headers['content-length']);
  if (Number.isFinite(declared) && declared > maxBytes) throw tooLarge(maxBytes);
  const body = await readCapped(request, maxBytes);
  const text = body.toString('utf8');
  try {
    return JSON.parse(text) as unknown;
  } catch (error) {
    throw new HttpError(400, {
      code: 'MALFORMED_JSON',
      message: `Body is not valid JSON: ${error instanceof SyntaxError ? error.message : 'parse failed'}`,
    });
  }
}

/**
 * Collects the body, refusing once it passes `maxBytes`. The request is paused, not destroyed,
 * on refusal: destroying it would reset the connection before the 413 reaches the client.
 */
function readCapped(request: IncomingMessage, maxBytes: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const settle = () => {
      request.off('data', onData).off('end', onEnd).off('error', onError);
    };
    const onData = (chunk: Buffer) => {
      size += chunk.byteLength;
      if (size <= maxBytes) return void chunks.push(chunk);
      settle();
      request.pause();
      reject(tooLarge(maxBytes));
    };
    const onEnd = () => {
      settle();
      resolve(Buffer.concat(chunks));
    };
    const onError = (error: Error) => {
      settle();
      reject(error);
    };
    request.on('data', onData).on('end', onEnd).on('error', onError);
  });
}

function tooLarge(maxBytes: number): HttpError {
  // Connection: close, because the rest of an oversized upload is not read.
  return new HttpError(
    413,
    {
      code: 'PAYLOAD_TOO_LARGE',
      message: `Body larger than ${maxBytes} bytes`,
      details: { maxBytes },
    },
    { connection: 'close' },
  );
}
