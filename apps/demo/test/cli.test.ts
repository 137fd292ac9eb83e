// The CLI end to end, as a user runs it: a real process, every layer, every attack.
import { execFile } from 'node:child_process';
import { mkdtemp, readdir, rm, symlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import type { DemoSummary } from '../src/cli/run-parts.ts';
import { startRedis } from './helpers/redis-server.ts';

const run = promisify(execFile);
const appDirectory = fileURLToPath(new URL('..', import.meta.url));

/** Runs `pnpm demo` (what it runs, without pnpm) with `args`; never throws on a non-zero exit. */
async function demo(args: string[], env: NodeJS.ProcessEnv = {}) {
  const argv = ['--conditions=@coda/source', '--no-node-snapshot', 'src/main.ts', ...args];
  try {
    const { stdout, stderr } = await run(process.execPath, argv, {
      cwd: appDirectory,
      env: { ...process.env, REDIS_URL: '', ...env },
      maxBuffer: 16 * 1024 * 1024,
      timeout: 150_000,
    });
    return { code: 0, stdout, stderr };
  } catch (error) {
    const failed = error as { code?: number; stdout?: string; stderr?: string };
    return { code: failed.code ?? -1, stdout: failed.stdout ?? '', stderr: failed.stderr ?? '' };
  }
}

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

  it('prints plain text without colour codes when stdout is not a terminal', async () => {
    const { code, stdout } = await demo(['limits'], { FORCE_COLOR: '1' });
    expect(code).toBe(0);
    expect(stdout).toContain('refused: BUDGET_EXHAUSTED');
    expect(stdout).toContain('refused: RATE_LIMITED');
    expect(stdout).not.toContain('\u001b[');
  }, 60_000);

  it('limits: keeps tier 3 and 4 counts in Redis when REDIS_URL is set', async () => {
    const redis = await startRedis();
    try {
      const { code, stdout } = await demo(['limits', '--json'], { REDIS_URL: redis.url });
      const summary = JSON.parse(stdout) as DemoSummary;
      expect(summary.parts[0]?.runs[0]).toEqual({ store: `redis ${redis.url}` });
      expect(summary.parts[0]?.status).toBe('ok');
      expect(code).toBe(0);
      // Every key the demo wrote is under its own prefix and expires on its own.
      const client = new Redis(redis.url);
      const keys = await client.keys('coda:demo:*');
      expect(keys.length).toBeGreaterThan(0);
      const ttls = await Promise.all(keys.map((key) => client.pttl(key)));
      expect(ttls.every((ttl) => ttl > 0)).toBe(true);
      await client.quit();
    } finally {
      await redis.stop();
    }
  }, 60_000);

  it('subprocess: reports what degraded when bubblewrap is missing', async () => {
    // PATH without bwrap: every program of /usr/bin but that one.
    const bin = await mkdtemp(join(tmpdir(), 'coda-demo-no-bwrap-'));
    try {
      const programs = (await readdir('/usr/bin')).filter((name) => name !== 'bwrap');
      await Promise.all(programs.map((name) => symlink(join('/usr/bin', name), join(bin, name))));
      const path = `${dirname(process.execPath)}:${bin}`;
      const { code, stdout } = await demo(['subprocess', '--json'], { PATH: path });
      const [part] = (JSON.parse(stdout) as DemoSummary).parts;
      expect(part?.status).toBe('ok');
      const runs = (part?.runs ?? []) as { degraded: boolean; sandboxApplied: boolean }[];
      expect(runs.map((run) => run.sandboxApplied)).toEqual([false, false, false, false]);
      // The write and the connection are no longer stopped, and the demo says so.
      expect(runs.map((run) => run.degraded)).toEqual([false, false, true, true]);
      expect(code).toBe(0);
    } finally {
      await rm(bin, { recursive: true, force: true });
    }
  }, 60_000);

  it('exits 2 with the usage on an unknown part', async () => {
    const { code, stderr } = await demo(['nonsense']);
    expect(code).toBe(2);
    expect(stderr).toContain('Unknown part: nonsense');
    expect(stderr).toContain('Usage: pnpm demo');
  });
});
