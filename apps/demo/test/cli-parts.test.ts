// Single parts of the CLI in the settings they adapt to: no terminal, Redis, no bubblewrap.
import { mkdtemp, readdir, rm, symlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { Redis } from 'ioredis';
import { describe, expect, inject, it } from 'vitest';
import type { DemoSummary } from '../src/cli/run-parts.ts';
import { demo } from './helpers/run-demo.ts';

describe('pnpm demo <part>', () => {
  it('prints plain text without colour codes when stdout is not a terminal', async () => {
    const { code, stdout } = await demo(['limits'], { FORCE_COLOR: '1' });
    expect(code).toBe(0);
    expect(stdout).toContain('refused: BUDGET_EXHAUSTED');
    expect(stdout).toContain('refused: RATE_LIMITED');
    expect(stdout).not.toContain('\u001b[');
    // Every column of the table has a heading.
    expect(stdout).toMatch(/^tier +user \/ conversation +outcome +retry after$/m);
  }, 60_000);

  it('parser: on a pipe, each call once (its result line, no progress line)', async () => {
    const { code, stdout } = await demo(['parser']);
    expect(code).toBe(0);
    const calls = stdout.split('\n').filter((line) => /^ {2}\w+(\(| \()/.test(line));
    expect(calls).toEqual([
      '  flatten_telemetry_frames (sample feed)',
      '  build_telemetry_segments (sample feed)',
      '  flatten_telemetry_frames (hostile: run-length bomb)',
      '  build_telemetry_segments (hostile: cyclic chain)',
      '  __proto__ (unknown parser)',
    ]);
    expect(stdout).not.toContain('flatten_telemetry_frames(sample feed)');
  }, 60_000);

  it('limits: keeps tier 3 and 4 counts in Redis when REDIS_URL is set', async () => {
    const redisUrl = inject('redisUrl');
    const { code, stdout } = await demo(['limits', '--json'], { REDIS_URL: redisUrl });
    const summary = JSON.parse(stdout) as DemoSummary;
    expect(summary.parts[0]?.runs[0]).toEqual({ store: `redis ${redisUrl}` });
    expect(summary.parts[0]?.status).toBe('ok');
    expect(code).toBe(0);
    // Every key the demo wrote is under its own prefix and expires on its own.
    const client = new Redis(redisUrl);
    try {
      const keys = await client.keys('coda:demo:*');
      expect(keys.length).toBeGreaterThan(0);
      const ttls = await Promise.all(keys.map((key) => client.pttl(key)));
      expect(ttls.every((ttl) => ttl > 0)).toBe(true);
    } finally {
      await client.quit();
    }
  }, 60_000);

  it('subprocess: says Landlock ran, and why, when bubblewrap is missing', async () => {
    // PATH without bwrap: every program of /usr/bin but that one.
    const bin = await mkdtemp(join(tmpdir(), 'coda-demo-no-bwrap-'));
    try {
      const programs = (await readdir('/usr/bin')).filter((name) => name !== 'bwrap');
      await Promise.all(programs.map((name) => symlink(join('/usr/bin', name), join(bin, name))));
      const path = `${dirname(process.execPath)}:${bin}`;
      const { code, stdout } = await demo(['subprocess', '--json'], { PATH: path });
      const [part] = (JSON.parse(stdout) as DemoSummary).parts;
      expect(part?.status).toBe('ok');
      const runs = (part?.runs ?? []) as {
        degraded: boolean;
        sandboxApplied: boolean;
        confinement?: string;
        notRun?: string;
      }[];
      // Landlock confines the first three; the write is still stopped.
      expect(
        runs.slice(0, 3).map((run) => [run.sandboxApplied, run.confinement, run.degraded]),
      ).toEqual([
        [true, 'landlock', false],
        [true, 'landlock', false],
        [true, 'landlock', false],
      ]);
      // This machine's node sits under /root (0700): uid 65534 cannot reach it without
      // bubblewrap's bind, so the sandbox refuses to start that check, and the demo says why.
      expect(runs[3]).toMatchObject({ degraded: true, sandboxApplied: false });
      expect(runs[3]?.notRun).toMatch(
        /^Invalid spawn options: file: .* on its way is not searchable by the sandbox identity 65534:65534/,
      );
      // The network allowlist runs under Landlock too (TCP connect to the proxy's port only).
      expect(
        runs.slice(4).map((run) => [run.degraded, run.sandboxApplied, run.confinement]),
      ).toEqual([
        [false, true, 'landlock'],
        [false, true, 'landlock'],
      ]);
      expect(code).toBe(0);
      const text = await demo(['subprocess'], { PATH: path });
      expect(text.stdout).toContain('backend: landlock');
      expect(text.stdout).toContain('why not a stronger one: bubblewrap: bwrap not found on PATH');
    } finally {
      await rm(bin, { recursive: true, force: true });
    }
  }, 60_000);
});
