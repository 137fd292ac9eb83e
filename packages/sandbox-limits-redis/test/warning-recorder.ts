// What the tests share: a logger that keeps the message of every warning.
import { type Logger, silentLogger } from '@coda/sandbox-core';

/** A logger recording each warning's message in `warnings` (other levels are dropped). */
export function warningRecorder(): { warnings: string[]; logger: Logger } {
  const warnings: string[] = [];
  const logger: Logger = {
    ...silentLogger,
    warn: (fields: object | string, message?: string) => {
      warnings.push(typeof fields === 'string' ? fields : (message ?? ''));
    },
  };
  return { warnings, logger };
}
