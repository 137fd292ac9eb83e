// The server's logger: pino, one JSON line per entry for a log collector, or pino-pretty's
// readable lines when a person is watching the terminal.
import type { Writable } from 'node:stream';
import { pino } from 'pino';
import pretty from 'pino-pretty';

/**
 * A pino logger writing to `stream` (stderr in `serve`, so stdout stays the user's). Pretty only
 * when `stream` is a terminal: a pipe or a file gets JSON a machine can read. The pretty stream
 * runs in this thread (no transport worker): a demo logs little.
 */
export function createServerLogger(stream: Writable & { isTTY?: boolean; fd?: number }) {
  if (stream.isTTY === true) {
    return pino(pretty({ destination: stream, colorize: true, ignore: 'pid,hostname' }));
  }
  return pino(stream);
}
