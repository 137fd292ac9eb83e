// Attacks on the confinement added lately: a command that ignores, blocks or tries to lift the
// CPU limit's SIGXCPU; commands (and what they leave behind) outliving close(); paths the
// sandbox identity may not read, reached through a symlink or named directly.
import { chmodSync, mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { createSandbox } from '../src/index.ts';
import { processesWith, python, settledProcesses, tempDir, token } from './support/helpers.ts';

const outcome = (result: {
  success: boolean;
  code?: string | undefined;
  error?: string | undefined;
  exitCode: number | null;
  timedOut: boolean;
}) => ({
  success: result.success,
  code: result.code,
  error: result.error,
  exitCode: result.exitCode,
  timedOut: result.timedOut,
});

// The wall clock (20 s) is far beyond the CPU limit, so an end before it is the rlimit's.
const cpuLimited = () => createSandbox({ timeoutMs: 20_000, rlimits: { cpuSecs: 1 } });

/** The kernel's SIGKILL at the hard CPU limit: an anonymous kill, reported as a crash. */
const killedAtHardLimit = {
  success: false,
  code: 'CRASH',
  error: 'Command was killed with SIGKILL',
  exitCode: 128 + 9,
  timedOut: false,
};

describe('the CPU limit against a command that fights SIGXCPU', () => {
  it.each([
    ['ignores', 'signal.signal(signal.SIGXCPU, signal.SIG_IGN)'],
    ['blocks', 'signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGXCPU])'],
    ['handles', 'signal.signal(signal.SIGXCPU, lambda *_: None)'],
  ])(
    'ends a command that %s SIGXCPU and keeps computing at the hard limit, one second later',
    async (_, fight) => {
      const result = await cpuLimited().run(python, [
        '-c',
        `import signal\n${fight}\nwhile True: pass`,
      ]);
      expect(outcome(result)).toEqual(killedAtHardLimit);
    },
  );

  it('refuses to raise the hard CPU limit; raising the soft one to it changes nothing', async () => {
    const script = [
      'import resource, signal, sys',
      'signal.signal(signal.SIGXCPU, signal.SIG_IGN)',
      'try: resource.setrlimit(resource.RLIMIT_CPU, (100, 100))',
      'except ValueError as e: print("raise refused")',
      'resource.setrlimit(resource.RLIMIT_CPU, (2, 2))',
      'print(resource.getrlimit(resource.RLIMIT_CPU)); sys.stdout.flush()',
      'while True: pass',
    ].join('\n');
    const result = await cpuLimited().run(python, ['-c', script]);
    expect(result.stdout).toBe('raise refused\n(2, 2)\n');
    expect(outcome(result)).toEqual(killedAtHardLimit);
  });
});

describe('the CPU limit is per process', () => {
  it('lets forked children pass cpuSecs together; the wall clock ends the command', async () => {
    // RLIMIT_CPU counts each process alone: children of 0.7 s each never reach a 1 s limit.
    const script = [
      'import os, resource, sys, time',
      'while True:',
      '    pid = os.fork()',
      '    if pid == 0:',
      '        end = time.process_time() + 0.7',
      '        while time.process_time() < end: pass',
      '        os._exit(0)',
      '    os.waitpid(pid, 0)',
      '    u = resource.getrusage(resource.RUSAGE_CHILDREN)',
      '    print(u.ru_utime + u.ru_stime); sys.stdout.flush()',
    ].join('\n');
    const result = await createSandbox({ timeoutMs: 5_000, rlimits: { cpuSecs: 1 } }).run(python, [
      '-c',
      script,
    ]);
    expect(result).toMatchObject({ success: false, code: 'TIMEOUT', timedOut: true });
    const childCpu = Number(result.stdout.trim().split('\n').at(-1));
    expect(childCpu).toBeGreaterThan(1);
  });
});

describe('close() leaves nothing running', () => {
  it('kills a TERM-ignoring setsid daemon and a double-forked grandchild of a spawned command', async () => {
    const tag = token();
    const sandbox = createSandbox({ timeoutMs: 0 });
    const script = [
      `setsid /bin/sh -c 'trap "" TERM HUP; sleep 1000 # ${tag}-daemon' </dev/null >/dev/null 2>&1 &`,
      `( ( trap "" TERM HUP; sleep 1000; : ${tag}-orphan ) & ) </dev/null >/dev/null 2>&1`,
      'echo started',
      'trap "" TERM',
      'sleep 1000',
    ].join('\n');
    const child = sandbox.spawn('/bin/sh', ['-c', script]);
    child.stdin.end();
    await new Promise<void>((resolve) => child.stdout.once('data', () => resolve()));
    expect(processesWith(tag).length).toBeGreaterThanOrEqual(3); // shell, daemon, orphan
    await sandbox.close();
    expect(await settledProcesses(tag)).toEqual([]);
    expect((await child.exited).cancelled).toBe(true);
  });

  it('ends every command of a sandbox disposed with await using, run and spawn alike', async () => {
    const tag = token();
    let running: Promise<unknown>[] = [];
    {
      await using sandbox = createSandbox({ timeoutMs: 0 });
      running = [1, 2, 3].map((n) =>
        sandbox.run('/bin/sh', ['-c', `trap "" TERM; sleep 1000 # ${tag}-${n}`]),
      );
      const spawned = sandbox.spawn('/bin/sh', ['-c', `sleep 1000 # ${tag}-spawned`]);
      spawned.stdin.end();
      running.push(spawned.exited);
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    await Promise.all(running);
    expect(await settledProcesses(tag)).toEqual([]);
  });
});

describe('paths the sandbox identity may not read', () => {
  const refusal = (field: string, path: string) =>
    `Invalid spawn options: ${field}: not readable by the sandbox identity 65534:65534 (make it readable by others, or set runAs) (got ${JSON.stringify(path)})`;

  it('refuses a mode-0 file and a 0700 directory of root by name', () => {
    const base = tempDir('/var/tmp');
    const file = join(base, 'mode0.txt');
    writeFileSync(file, 'secret');
    chmodSync(file, 0o000);
    const dir = join(base, 'private');
    mkdirSync(dir, { mode: 0o700 });
    expect(() => createSandbox({ readOnlyPaths: [file] }).spawn('/bin/true')).toThrow(
      refusal('policy.readOnlyPaths.0', file),
    );
    expect(() =>
      createSandbox({ allowFileWrites: false }).spawn('/bin/true', [], { cwd: dir }),
    ).toThrow(refusal('cwd', dir));
  });

  it('refuses a symlink to a root-only place outside its directory as an escape, before any permission check', () => {
    const base = tempDir('/var/tmp');
    const outside = tempDir('/var/tmp');
    const secret = join(outside, 'secret');
    mkdirSync(secret, { mode: 0o700 });
    const link = join(base, 'link');
    symlinkSync(secret, link);
    expect(() => createSandbox({ readOnlyPaths: [link] }).spawn('/bin/true')).toThrow(
      `Invalid spawn options: policy.readOnlyPaths.0: symlink ${link} leads out of ${base} (to ${secret}) (got ${JSON.stringify(link)})`,
    );
  });

  it('checks the resolved target of a symlink inside its directory, and names it', () => {
    const base = tempDir('/var/tmp');
    const target = join(base, 'mode0.txt');
    writeFileSync(target, 'secret');
    chmodSync(target, 0o000);
    const link = join(base, 'link');
    symlinkSync('mode0.txt', link);
    expect(() => createSandbox({ readOnlyPaths: [link] }).spawn('/bin/true')).toThrow(
      refusal('policy.readOnlyPaths.0', target),
    );
  });
});
