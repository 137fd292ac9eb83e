// With bubblewrap hidden from PATH: limits, cgroups and a process group still apply, the seed's
// warning is logged once, results say `sandboxApplied: false`, and strict mode refuses.
import { mkdtempSync, rmSync, statSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SandboxUnavailableError } from '@coda/sandbox-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSandbox, degradedWarning, SandboxControl } from '../src/index.ts';
import { settledProcesses, token } from './support/helpers.ts';

const hostPath = process.env.PATH;
let bin = '';

beforeAll(() => {
  bin = mkdtempSync(join(tmpdir(), 'coda-fallback-bin-'));
  for (const tool of ['prlimit', 'sh', 'sleep', 'setsid', 'echo', 'cat', 'true']) {
    const target = ['/usr/bin', '/bin']
      .map((dir) => join(dir, tool))
      .find((path) => {
        try {
          return statSync(path).isFile();
        } catch {
          return false;
        }
      });
    if (target !== undefined) symlinkSync(target, join(bin, tool));
  }
  process.env.PATH = bin; // bwrap is not on it
});
afterAll(() => {
  process.env.PATH = hostPath;
  rmSync(bin, { recursive: true, force: true });
});

function recordingLogger(): { warnings: unknown[][]; logger: never } {
  const warnings: unknown[][] = [];
  const ignore = (): void => {};
  return {
    warnings,
    logger: {
      debug: ignore,
      info: ignore,
      error: ignore,
      warn: (...args: unknown[]) => warnings.push(args),
    } as never,
  };
}

describe('without bubblewrap', () => {
  it('runs under limits only, says so, and warns once', async () => {
    const { warnings, logger } = recordingLogger();
    const sandbox = createSandbox({ timeoutMs: 5_000 }, { logger });
    const first = await sandbox.run('echo', ['hello']);
    const second = await sandbox.run('echo', ['again']);
    expect(first).toMatchObject({ success: true, stdout: 'hello\n', sandboxApplied: false });
    expect(second.sandboxApplied).toBe(false);
    expect(first.controls).toEqual(
      expect.arrayContaining([
        SandboxControl.cleanEnvironment,
        SandboxControl.rlimitCpu,
        SandboxControl.rlimitNofile,
        SandboxControl.killProcessGroup,
        SandboxControl.wallClockTimeout,
      ]),
    );
    expect(first.controls).not.toContain(SandboxControl.bubblewrap);
    expect(first.controls).not.toContain(SandboxControl.seccomp);
    expect(warnings).toEqual([[{ reason: 'bwrap not found on PATH' }, degradedWarning]]);
    expect(degradedWarning).toBe('[Sandbox] seccomp not available, using resource limits only');
  });

  it('still kills a setsid daemon on timeout (cgroup kill)', async () => {
    const tag = token();
    const sandbox = createSandbox({ timeoutMs: 600 });
    const result = await sandbox.run('sh', [
      '-c',
      `setsid sh -c 'trap "" TERM; sleep 1000 # ${tag}' </dev/null >/dev/null 2>&1 & sleep 100`,
    ]);
    expect(result.timedOut).toBe(true);
    expect(result.controls).toEqual(
      expect.arrayContaining([SandboxControl.killCgroup, SandboxControl.killProcessGroup]),
    );
    expect(await settledProcesses(tag)).toEqual([]);
  });

  it('refuses to run unconfined in strict mode', async () => {
    const sandbox = createSandbox({ strict: true });
    const result = await sandbox.run('echo', ['never']);
    expect(result).toMatchObject({
      success: false,
      sandboxApplied: false,
      stdout: '',
      error: 'Refusing to run unconfined (strict policy): bwrap not found on PATH',
    });
    expect(() => sandbox.spawn('echo', ['never'])).toThrow(SandboxUnavailableError);
    expect(sandbox.execSync('echo never').error).toBe(result.error);
  });
});
