import { describe, expect, it } from 'vitest';
import { defaultGuardSettings } from '../compose/guards.ts';
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

  it('serves on the given port and host, with the default limits', () => {
    expect(parseDemoArgs(['serve', '--port', '0', '--host', '0.0.0.0'], {})).toEqual({
      kind: 'serve',
      port: 0,
      host: '0.0.0.0',
      admission: defaultGuardSettings,
    });
  });

  it('takes each limit from its flag, else its variable', () => {
    const command = parseDemoArgs(['serve', '--rate', '12', '--concurrency', '3'], {
      DEMO_RATE: '99',
      DEMO_BURST: '4',
      DEMO_TURN_BUDGET: '7',
      PORT: '4000',
    });
    expect(command).toEqual({
      kind: 'serve',
      port: 4_000,
      host: '127.0.0.1',
      admission: {
        ratePerUser: 12,
        burst: 4,
        maxExecutionsPerTurn: 7,
        maxConcurrentPerUser: 3,
        windowMs: 60_000,
      },
    });
  });

  it('names every bad limit and where it came from', () => {
    expect(() =>
      parseDemoArgs(['serve', '--rate', '0', '--burst', 'x'], { DEMO_CONCURRENCY: '1.5' }),
    ).toThrow(
      '--rate must be an integer from 1 to 100000, got 0; --burst must be an integer from 1 to 100000, got x; $DEMO_CONCURRENCY must be an integer from 1 to 1000, got 1.5',
    );
  });

  it('refuses what it does not understand', () => {
    expect(() => parseDemoArgs(['isolate', 'parser'])).toThrow(UsageError);
    expect(() => parseDemoArgs(['--colour'])).toThrow(UsageError);
    expect(() => parseDemoArgs(['serve', '--port', '70000'])).toThrow(/--port must be/);
    expect(() => parseDemoArgs(['limits', '--port', '1', '--rate', '2'])).toThrow(
      '--port, --rate: for serve only',
    );
  });
});
