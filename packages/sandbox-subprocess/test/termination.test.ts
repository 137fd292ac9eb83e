// Timeouts, aborts and the command's own exit leave nothing running: TERM-ignoring loops,
// setsid daemons, double forks and fork bombs included. Memory bombs end at the limit.
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { createSandbox, SandboxControl } from '../src/index.ts';
import {
  node,
  processesWith,
  python,
  settledProcesses,
  tempDir,
  token,
} from './support/helpers.ts';

describe('timeouts kill everything the command started', () => {
  const sandbox = createSandbox({ timeoutMs: 800 });

  it('kills a loop that ignores SIGTERM', async () => {
    const tag = token();
    const result = await sandbox.run('/bin/sh', [
      '-c',
      `trap "" TERM INT HUP; while :; do sleep 0.05; done # ${tag}`,
    ]);
    expect(result).toMatchObject({
      success: false,
      timedOut: true,
      error: 'Command timed out after 800 ms',
    });
    expect(result.durationMs).toBeGreaterThanOrEqual(790);
    expect(result.durationMs).toBeLessThan(5_000);
    expect(await settledProcesses(tag)).toEqual([]);
  });

  it('kills a setsid daemon, on timeout and when the command exits first', async () => {
    const tag = token();
    const daemon = `setsid /bin/sh -c 'trap "" TERM HUP; sleep 1000 # ${tag}' </dev/null >/dev/null 2>&1 &`;
    const timedOut = await sandbox.run('/bin/sh', ['-c', `${daemon} sleep 100`]);
    expect(timedOut.timedOut).toBe(true);
    expect(await settledProcesses(tag)).toEqual([]);

    const exited = await sandbox.run('/bin/sh', ['-c', `${daemon} echo started`]);
    expect(exited).toMatchObject({ success: true, stdout: 'started\n', timedOut: false });
    expect(await settledProcesses(tag)).toEqual([]);
  });

  it('kills a double-forked child', async () => {
    const tag = token();
    const result = await sandbox.run('/bin/sh', [
      '-c',
      `( /bin/sh -c 'sleep 1000 # ${tag}' & ) ; sleep 100`,
    ]);
    expect(result.timedOut).toBe(true);
    expect(await settledProcesses(tag)).toEqual([]);
  });

  it('contains a fork bomb', async () => {
    const tag = token();
    const bomb = createSandbox({ timeoutMs: 2_000, rlimits: { processes: 64 } });
    // The bomb runs in a background subshell, forked before it starts, and `exec` needs no new
    // process: so the outer shell still waits out the timeout when the bomb has used up the
    // process limit (run in the outer shell itself, a fork of its own failed with EAGAIN now and
    // then and the shell exited after 71 ms).
    const result = await bomb.run('/bin/sh', [
      '-c',
      `( f() { f | f & }; f ) 2>/dev/null & exec sleep 100 # ${tag}`,
    ]);
    expect(result.success).toBe(false);
    expect(result.timedOut).toBe(true);
    expect(result.controls).toEqual(expect.arrayContaining([SandboxControl.pidsCgroupV1]));
    expect(await settledProcesses(tag, 3_000)).toEqual([]);
  });

  it('kills on abort and on kill()', async () => {
    const tag = token();
    const controller = new AbortController();
    const pending = sandbox.run('/bin/sh', ['-c', `sleep 100 # ${tag}`], {
      signal: controller.signal,
    });
    setTimeout(() => controller.abort(), 100);
    const result = await pending;
    expect(result).toMatchObject({
      cancelled: true,
      timedOut: false,
      error: 'Command was cancelled',
    });

    const child = sandbox.spawn('/bin/sh', ['-c', `sleep 100 # ${tag}`]);
    await new Promise((resolve) => setTimeout(resolve, 150));
    expect(processesWith(tag).length).toBeGreaterThan(0); // the scan does see the command
    child.kill();
    expect(await child.exited).toMatchObject({ cancelled: true, timedOut: false });
    expect(await settledProcesses(tag)).toEqual([]);
  });
});

describe('rlimits', () => {
  it('applies CPU, open files, file size and core limits, soft and hard', async () => {
    const sandbox = createSandbox({ rlimits: { cpuSecs: 7, openFiles: 64, fileSizeBytes: 4096 } });
    const result = await sandbox.run('/bin/cat', ['/proc/self/limits']);
    const limit = (name: string): string[] =>
      (result.stdout.split('\n').find((line) => line.startsWith(name)) ?? '')
        .split(/\s{2,}/)
        .slice(1, 3);
    expect(limit('Max cpu time')).toEqual(['7', '8']); // SIGXCPU at 7 s, SIGKILL at 8 s
    expect(limit('Max open files')).toEqual(['64', '64']);
    expect(limit('Max file size')).toEqual(['4096', '4096']);
    expect(limit('Max core file size')).toEqual(['0', '0']);
  });

  it('ends a CPU-bound command at its CPU limit, before the wall clock', async () => {
    const sandbox = createSandbox({ timeoutMs: 20_000, rlimits: { cpuSecs: 1 } });
    const result = await sandbox.run('/bin/sh', ['-c', 'while :; do :; done']);
    expect(result).toMatchObject({
      success: false,
      timedOut: false,
      code: 'TIMEOUT',
      error: 'Command was killed with SIGXCPU (CPU time limit)',
      exitCode: 128 + 24, // bubblewrap reports signal n as 128 + n
    });
  });
});

describe('cgroups', () => {
  it('are removed after the run, daemons or not', async () => {
    const sandbox = createSandbox({ timeoutMs: 500 });
    const result = await sandbox.run('/bin/sh', [
      '-c',
      'grep -E ":(memory|pids):" /proc/self/cgroup; setsid sleep 100 </dev/null >/dev/null 2>&1 & sleep 100',
    ]);
    expect(result.timedOut).toBe(true);
    const dirs = result.stdout
      .trim()
      .split('\n')
      .map((line) => {
        const [, controller = '', path = ''] = line.split(':');
        return `/sys/fs/cgroup/${controller}${path}`;
      });
    expect(dirs).toHaveLength(2);
    expect(dirs.every((dir) => /\/coda-sandbox-\d+\/run-\d+$/.test(dir))).toBe(true);
    const deadline = Date.now() + 3_000;
    while (dirs.some((dir) => existsSync(dir)) && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    expect(dirs.filter((dir) => existsSync(dir))).toEqual([]);
  });
});

describe('memory', () => {
  it('ends a Python memory bomb at the cgroup limit', async () => {
    const result = await createSandbox({ maxMemoryMb: 64, timeoutMs: 20_000 }).run(python, [
      '-c',
      'b = [bytes(8 << 20) + b"x" for _ in range(64)]; print("survived")',
    ]);
    expect(result.success).toBe(false);
    expect(result.memoryExceeded).toBe(true);
    expect(result.stdout).toBe('');
    expect(result.controls).toContain(SandboxControl.memoryCgroupV1);
  });

  it('ends a Node memory bomb while node -e still starts under 256 MB', async () => {
    const sandbox = createSandbox({ maxMemoryMb: 256, timeoutMs: 30_000 });
    const starts = await sandbox.run(node, ['-e', 'console.log(process.versions.node)']);
    expect(starts.stdout).toBe(`${process.versions.node}\n`);
    expect(starts.success).toBe(true);
    expect(starts.memoryExceeded).toBe(false);

    const bomb = await sandbox.run(node, [
      '-e',
      'const a = []; for (;;) a.push(Buffer.alloc(16 << 20, 1)); ',
    ]);
    expect(bomb.success).toBe(false);
    expect(bomb.memoryExceeded).toBe(true);
    expect(bomb.error).toBe('Command exceeded its memory limit (256 MiB)');
  });
});

describe('spawn', () => {
  it('streams stdio and extra pipes, and reports how it ended', async () => {
    const sandbox = createSandbox();
    const child = sandbox.spawn(
      '/bin/sh',
      ['-c', 'echo to-fd3 >&3; read line <&4; echo "got $line"; exit 3'],
      {
        extraPipes: 2,
      },
    );
    const fromFd3: Buffer[] = [];
    child.pipes[0]!.on('data', (chunk: Buffer) => fromFd3.push(chunk));
    child.pipes[1]!.end('hello\n');
    const stdout: Buffer[] = [];
    child.stdout.on('data', (chunk: Buffer) => stdout.push(chunk));
    const exit = await child.exited;
    expect(exit).toMatchObject({ exitCode: 3, signal: null, timedOut: false, cancelled: false });
    expect(Buffer.concat(stdout).toString()).toBe('got hello\n');
    expect(Buffer.concat(fromFd3).toString()).toBe('to-fd3\n');
    expect(child.sandboxApplied).toBe(true);
    expect(typeof child.pid).toBe('number');
  });

  it('honours a per-call timeout', async () => {
    const sandbox = createSandbox({ timeoutMs: 0 });
    const child = sandbox.spawn('/bin/sleep', ['100'], { timeoutMs: 300 });
    const exit = await child.exited;
    expect(exit.timedOut).toBe(true);
    expect(exit.durationMs).toBeGreaterThanOrEqual(290);
  });

  it('makes readOnlyPaths visible and read-only, even under the private /tmp', async () => {
    const dir = tempDir();
    writeFileSync(join(dir, 'module.js'), 'parser');
    const sandbox = createSandbox({
      allowFileWrites: true,
      restrictToDirectory: tempDir('/var/tmp'),
    });
    const result = await sandbox.run(
      '/bin/sh',
      ['-c', `cat ${dir}/module.js; echo x > ${dir}/module.js || echo refused`],
      {
        readOnlyPaths: [dir],
      },
    );
    expect(result.stdout).toBe('parserrefused\n');
    expect(readFileSync(join(dir, 'module.js'), 'utf8')).toBe('parser');
  });
});
