import { SandboxValidationError } from '@coda/sandbox-core';
import { describe, expect, it } from 'vitest';
import { resolveEngineConfig, validateSubmitRequest } from './engine-config.ts';

describe('resolveEngineConfig', () => {
  it('fills the documented defaults', () => {
    expect(resolveEngineConfig()).toEqual({
      limits: {},
      maxConcurrent: 8,
      maxQueueWaitMs: 120_000,
      poolSize: 4,
      isolation: 'process',
      workers: 2,
      workerBaseMemoryMb: 256,
      dataHandler: undefined,
      tools: {},
      language: 'javascript',
      guards: [],
      logger: undefined,
      telemetry: undefined,
      wasmModules: [],
    });
  });

  it('names a bad maxQueueWaitMs and its value', () => {
    for (const value of [0, -1, 1.5, 3_600_001, '100']) {
      expect(() => resolveEngineConfig({ maxQueueWaitMs: value } as never)).toThrow(
        /maxQueueWaitMs/,
      );
    }
    expect(resolveEngineConfig({ maxQueueWaitMs: 1 }).maxQueueWaitMs).toBe(1);
  });

  it('rejects guards and loggers of the wrong shape', () => {
    expect(() =>
      resolveEngineConfig({ guards: [{ name: 'g' }], logger: { info() {} } } as never),
    ).toThrow(SandboxValidationError);
  });
});

describe('validateSubmitRequest', () => {
  it('accepts a minimal request and refuses unknown fields', () => {
    expect(validateSubmitRequest({ code: 'return 1' })).toEqual({ code: 'return 1' });
    expect(() => validateSubmitRequest({ code: 'x', timeout: 5 })).toThrow(
      /timeout: unknown option/,
    );
    expect(() => validateSubmitRequest({ code: 'x', signal: {} })).toThrow(/signal/);
  });
});
