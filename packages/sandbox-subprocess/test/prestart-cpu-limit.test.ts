// A per-call CPU limit (timeoutMs or cpuSecs) is not part of a pre-started sandbox's key: the
// stub (src/linux/prestart-stub.ts) sets the run's own RLIMIT_CPU from its message. Runs whose
// limits all differ are served warm, each limited exactly as it asked (the kernel's SIGXCPU at
// its own seconds), as a cold run is; a stub message whose limit is not a positive integer
// starts nothing. Expected values come from the tables here, never from the pool's code.
import { spawn } from 'node:child_process';
import type { Readable, Writable } from 'node:stream';
import { describe, expect, it, onTestFinished } from 'vitest';
import { createSandbox, type SubprocessSandbox } from '../src/index.ts';
import { prestartPoolOf } from '../src/linux/prestart-pool.ts';
import { stubScript } from '../src/linux/prestart-stub.ts';
import { python } from './support/helpers.ts';

const policy = { allowNetwork: false, allowFileWrites: false, timeoutMs: 20_000 } as const;

async function sandboxes(): Promise<{ warm: SubprocessSandbox; cold: SubprocessSandbox }> {
  const warm = createSandbox(policy);
  const cold = createSandbox(policy);
  onTestFinished(() => Promise.all([warm.close(), cold.close()]).then(() => undefined));
  await prestartPoolOf(cold).close(); // every run of `cold` starts cold
  expect((await warm.run('/bin/true')).success).toBe(true);
  await settled(warm);
  return { warm, cold };
}

/** Waits until the pool's refills (started after a run's exit) are done. */
async function settled(sandbox: SubprocessSandbox): Promise<void> {
  await new Promise((resolve) => setImmediate(resolve));
  await prestartPoolOf(sandbox).settled();
}

/** Per-call limits, each different, and the soft and hard RLIMIT_CPU each must get. */
const limitRows: {
  options: { timeoutMs?: number; cpuSecs?: number };
  soft: string;
  hard: string;
}[] = [
  { options: { timeoutMs: 11_000 }, soft: '11', hard: '12' },
  { options: { timeoutMs: 12_500 }, soft: '13', hard: '14' },
  { options: { cpuSecs: 3 }, soft: '3', hard: '4' },
  { options: { timeoutMs: 4_000 }, soft: '4', hard: '5' },
  { options: { cpuSecs: 1 }, soft: '1', hard: '2' },
  { options: { timeoutMs: 19_001 }, soft: '20', hard: '21' },
  { options: { cpuSecs: 600 }, soft: '600', hard: '601' },
  { options: { timeoutMs: 7_000, cpuSecs: 9 }, soft: '9', hard: '10' },
  { options: {}, soft: '20', hard: '21' }, // the policy's 20 s
  { options: { cpuSecs: 2 ** 40 }, soft: String(2 ** 40), hard: String(2 ** 40 + 1) },
];

/** `run()`'s result without its duration, and whether a pre-started sandbox served it. */
async function runResult(
  sandbox: SubprocessSandbox,
  file: string,
  args: string[],
  options: Parameters<SubprocessSandbox['run']>[2],
) {
  const pooled = prestartPoolOf(sandbox).pids();
  const { durationMs, ...result } = await sandbox.run(file, args, options);
  expect(durationMs).toBeGreaterThan(0);
  // A taken sandbox leaves the pool at once; a cold run leaves every pooled one in it.
  const taken = pooled.filter((pid) => !prestartPoolOf(sandbox).pids().includes(pid));
  return { taken, result };
}

describe('per-call CPU limits and the pre-started sandboxes', () => {
  it('runs whose timeoutMs or cpuSecs all differ are served warm, none pre-started in vain', async () => {
    const { warm, cold } = await sandboxes();
    const pool = prestartPoolOf(warm);
    const seenInPool = new Set<number>(pool.pids());
    const served: number[] = [];
    const script = ['-c', 'ulimit -S -t; ulimit -H -t'];
    for (const row of limitRows) {
      const warmRun = await runResult(warm, '/bin/sh', script, row.options);
      const coldRun = await runResult(cold, '/bin/sh', script, row.options);
      expect(warmRun.result).toMatchObject({ success: true, stdout: `${row.soft}\n${row.hard}\n` });
      // Every field: code, output, controls, sandboxApplied, confinement, limits.
      expect(warmRun.result).toEqual(coldRun.result);
      // Warm: exactly its own sandbox left the pool (none was dropped for another key).
      expect([warmRun.taken.length, coldRun.taken.length]).toEqual([1, 0]);
      served.push(...warmRun.taken);
      await settled(warm);
      for (const pid of pool.pids()) seenInPool.add(pid);
    }
    // Every run warm; every sandbox pre-started either served one or still waits for the next.
    expect(served.length).toBe(limitRows.length);
    expect([...seenInPool].sort()).toEqual([...served, ...pool.pids()].sort());
  });

  /** A busy loop printing its CPU time (process_time counts from fork, as RLIMIT_CPU does). */
  const busy = [
    '-c',
    'import time\nlast = 0.0\nwhile True:\n    now = time.process_time()\n    if now - last >= 0.05:\n        last = now\n        print(f"{now:.2f}", flush=True)',
  ];
  it.each([1, 2])(
    'a busy loop is ended by SIGXCPU at its own cpuSecs (%i s), warm as cold',
    async (cpuSecs) => {
      const { warm, cold } = await sandboxes();
      const [warmRun, coldRun] = await Promise.all([
        runResult(warm, python, busy, { cpuSecs }),
        runResult(cold, python, busy, { cpuSecs }),
      ]);
      expect([warmRun.taken.length, coldRun.taken.length]).toEqual([1, 0]);
      for (const { result } of [warmRun, coldRun]) {
        // bwrap's pid 1 reports the command's SIGXCPU (24) as exit 128 + 24.
        expect(result).toMatchObject({
          code: 'TIMEOUT',
          exitCode: 152,
          error: 'Command was killed with SIGXCPU (CPU time limit)',
          timedOut: false,
        });
        const last = Number(result.stdout.trim().split('\n').at(-1));
        // Printed every 50 ms of CPU until the kernel ended it at `cpuSecs` (a margin for load).
        expect(last).toBeGreaterThan(cpuSecs - 0.5);
        expect(last).toBeLessThan(cpuSecs);
      }
      const { stdout: _warm, ...warmRest } = warmRun.result;
      const { stdout: _cold, ...coldRest } = coldRun.result;
      expect(warmRest).toEqual(coldRest);
    },
  );
});

/** Stub messages (the CPU field first) that the stub refuses, and one it takes. */
const messageRows: { cpu: string; exitCode: number; started: boolean; stdout: string }[] = [
  { cpu: '5', exitCode: 0, started: true, stdout: '5\n6\n' },
  { cpu: '', exitCode: 125, started: false, stdout: '' },
  { cpu: '0', exitCode: 125, started: false, stdout: '' },
  { cpu: '-1', exitCode: 125, started: false, stdout: '' },
  { cpu: '07', exitCode: 125, started: false, stdout: '' },
  { cpu: 'unlimited', exitCode: 125, started: false, stdout: '' },
  { cpu: '1+1', exitCode: 125, started: false, stdout: '' },
  { cpu: '5\n', exitCode: 125, started: false, stdout: '' },
  { cpu: '12345678901234567', exitCode: 125, started: false, stdout: '' },
];

describe('the stub’s CPU field', () => {
  it.each(messageRows)('CPU field $cpu: exit $exitCode, started=$started', async (row) => {
    // The stub as bubblewrap would start it (fd 3 the start descriptor, 4 the command pipe).
    const child = spawn(
      '/bin/bash',
      ['--norc', '--noprofile', '-c', stubScript(3, 4, true), 'stub'],
      {
        env: {},
        stdio: ['ignore', 'pipe', 'pipe', 'pipe', 'pipe'],
      },
    );
    let out = '';
    let start = '';
    child.stdout!.on('data', (chunk) => {
      out += chunk;
    });
    (child.stdio[3] as Readable).on('data', (chunk) => {
      start += chunk;
    });
    const message = [row.cpu, '/', '1', 'K=v', '/bin/sh', '-c', 'ulimit -S -t; ulimit -H -t'];
    (child.stdio[4] as Writable).end(message.map((field) => `${field}\0`).join(''));
    const exitCode = await new Promise((resolve) => child.once('close', resolve));
    expect({ exitCode, started: start.includes('s'), stdout: out }).toEqual({
      exitCode: row.exitCode,
      started: row.started,
      stdout: row.stdout,
    });
    expect(start.startsWith('r')).toBe(true);
  });
});
