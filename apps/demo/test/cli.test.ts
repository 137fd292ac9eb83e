// The CLI end to end, as a user runs it: a real process, every layer, every attack.
import { describe, expect, it } from 'vitest';
import type { DemoSummary } from '../src/cli/run-parts.ts';
import { demo } from './helpers/run-demo.ts';

describe('pnpm demo', () => {
  it('--json: runs every part and contains every attack of the threat model', async () => {
    const { code, stdout, stderr } = await demo(['--json']);
    const summary = JSON.parse(stdout) as DemoSummary;
    expect(summary.parts.map((part) => [part.part, part.status, part.reason])).toEqual([
      ['isolate', 'ok', undefined],
      ['attacks', 'ok', undefined],
      ['subprocess', 'ok', undefined],
      ['parser', 'ok', undefined],
      ['limits', 'ok', undefined],
    ]);
    const attacks = summary.parts.flatMap((part) => part.attacks);
    const notContained = attacks.filter((attack) => !attack.contained);
    expect(notContained).toEqual([]);
    // Seed 000's eleven attacks (module escape twice: require and import), plus the other layers'.
    expect(attacks.filter((attack) => attack.layer === 'isolate')).toHaveLength(12);
    expect(new Set(attacks.map((attack) => attack.layer))).toEqual(
      new Set(['isolate', 'subprocess', 'parser-host', 'limits']),
    );
    expect(summary.attacks).toEqual({ total: attacks.length, contained: attacks.length });
    expect(summary.ok).toBe(true);
    expect(code, stderr).toBe(0);
  }, 160_000);

  it('exits 2 with the usage on an unknown part', async () => {
    const { code, stderr } = await demo(['nonsense']);
    expect(code).toBe(2);
    expect(stderr).toContain('Unknown part: nonsense');
    expect(stderr).toContain('Usage: pnpm demo');
  });
});
