import { describe, expect, it } from 'vitest';
import { SandboxValidationError } from '../errors/error-classes.ts';
import { defaultParserLimits, resolveParserLimits } from './parser-limits.ts';

describe('parser limits', () => {
  it('default to seed 004’s 10 s wall clock, 256 MiB and 5 s CPU', () => {
    expect(defaultParserLimits).toEqual({
      timeout: 10_000,
      memoryBytes: 256 * 1024 * 1024,
      cpuSecs: 5,
    });
  });

  it('merge a partial over the defaults', () => {
    expect(resolveParserLimits({ cpuSecs: 1 })).toEqual({ ...defaultParserLimits, cpuSecs: 1 });
  });

  it('name every bad field', () => {
    const run = () =>
      resolveParserLimits({ timeout: 0, memoryBytes: 1024, cpuSecs: 0.5, kwargs: {} } as never);
    expect(run).toThrow(SandboxValidationError);
    try {
      run();
    } catch (error) {
      expect((error as SandboxValidationError).issues.map((issue) => issue.path)).toEqual([
        'timeout',
        'memoryBytes',
        'cpuSecs',
        'kwargs',
      ]);
    }
  });
});
