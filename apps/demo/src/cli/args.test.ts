import { describe, expect, it } from 'vitest';
import { parseDemoArgs, partNames, UsageError } from './args.ts';

describe('parseDemoArgs', () => {
  it('runs every part with no argument, one part by name', () => {
    expect(parseDemoArgs([])).toEqual({ kind: 'run', parts: partNames, json: false });
    expect(parseDemoArgs(['parser', '--json'])).toEqual({
      kind: 'run',
      parts: ['parser'],
      json: true,
    });
  });

  it('serves on the given port and host', () => {
    expect(parseDemoArgs(['serve', '--port', '0', '--host', '0.0.0.0'])).toEqual({
      kind: 'serve',
      port: 0,
      host: '0.0.0.0',
    });
  });

  it('refuses what it does not understand', () => {
    expect(() => parseDemoArgs(['isolate', 'parser'])).toThrow(UsageError);
    expect(() => parseDemoArgs(['--colour'])).toThrow(UsageError);
    expect(() => parseDemoArgs(['serve', '--port', '70000'])).toThrow(/--port must be/);
    expect(() => parseDemoArgs(['limits', '--port', '1'])).toThrow(/serve only/);
  });
});
