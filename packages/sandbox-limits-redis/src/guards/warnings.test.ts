import type { Logger } from '@coda/sandbox-core';
import { describe, expect, it } from 'vitest';
import { createWarner } from './warnings.ts';

function recorder() {
  const lines: { fields: object; message: string | undefined }[] = [];
  const logger: Logger = {
    debug() {},
    info() {},
    error() {},
    warn: (fields: object | string, message?: string) => {
      lines.push(
        typeof fields === 'string' ? { fields: {}, message: fields } : { fields, message },
      );
    },
  };
  return { lines, logger };
}

describe('createWarner', () => {
  it('logs the first warning of a topic and drops repeats for a while', () => {
    const { lines, logger } = recorder();
    const warn = createWarner(logger, 'g');
    for (let i = 0; i < 1_000; i++) warn('fail-open', { i }, 'store failed');
    warn('renew', {}, 'renewal failed');
    expect(lines).toEqual([
      { fields: { guard: 'g', i: 0 }, message: 'store failed' },
      { fields: { guard: 'g' }, message: 'renewal failed' },
    ]);
  });

  it('never lets a throwing logger reach the caller', () => {
    const logger: Logger = {
      debug() {},
      info() {},
      error() {},
      warn: () => {
        throw new Error('logger broke');
      },
    };
    expect(() => createWarner(logger, 'g')('t', {}, 'm')).not.toThrow();
  });
});
