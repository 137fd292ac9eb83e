// With bubblewrap hidden from PATH: the Landlock backend runs the command (limits, cgroups, a
// process group and seccomp with it), and strict mode, which asks for bubblewrap, refuses. Hosts
// with no Landlock either (rlimits only) are in confinement-environments.test.ts.
import { chmodSync, mkdirSync, mkdtempSync, rmSync, statSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SandboxUnavailableError } from '@coda/sandbox-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createSandbox,
  degradedWarning,
  resolveSubprocessPolicy,
  SandboxControl,
} from '../src/index.ts';
import { prepareLaunch, releasePlan } from '../src/process/spawn-confined.ts';
import { settledProcesses, tempDir, token } from './support/helpers.ts';

const hostPath = process.env.PATH;
let bin = '';

beforeAll(() => {
  bin = mkdtempSync(join(tmpdir(), 'coda-fallback-bin-'));
  chmodSync(bin, 0o755); // readable by the sandbox identity, for the run that names it
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
  it('runs under Landlock, says so, and warns nothing', async () => {
    const { warnings, logger } = recordingLogger();
    const sandbox = createSandbox({ timeoutMs: 5_000 }, { logger });
    const first = await sandbox.run('echo', ['hello']);
    expect(first).toMatchObject({
      success: true,
      stdout: 'hello\n',
      sandboxApplied: true,
      confinement: 'landlock',
    });
    expect(first.controls).toEqual(
      expect.arrayContaining([
        SandboxControl.cleanEnvironment,
        SandboxControl.landlock,
        SandboxControl.landlockFilesystem,
        SandboxControl.seccomp,
        SandboxControl.rlimitCpu,
        SandboxControl.rlimitNofile,
        SandboxControl.killProcessGroup,
        SandboxControl.wallClockTimeout,
      ]),
    );
    expect(first.controls).not.toContain(SandboxControl.bubblewrap);
    expect(sandbox.execSync('echo sync')).toMatchObject({
      success: true,
      stdout: 'sync\n',
      confinement: 'landlock',
    });
    expect(warnings).toEqual([]);
    expect(degradedWarning).toBe('[Sandbox] seccomp not available, using resource limits only');
  });

  it('still kills a setsid daemon on timeout (cgroup kill)', async () => {
    const tag = token();
    // PATH is a directory of links in /tmp, which Landlock does not show unless named.
    const sandbox = createSandbox({ timeoutMs: 600, readOnlyPaths: [bin] });
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

  it.runIf(process.getuid?.() === 0)(
    'names a path the dropped identity cannot reach through its parents (Landlock binds nothing)',
    async () => {
      const closed = mkdtempSync(join(tmpdir(), 'coda-closed-')); // 0700, root's
      const inner = join(closed, 'tool');
      mkdirSync(inner, { mode: 0o755 });
      try {
        const result = createSandbox({ readOnlyPaths: [inner] });
        expect(() => result.spawn('echo', ['never'])).toThrow(
          `Invalid spawn options: policy.readOnlyPaths.0: ${closed} on its way is not searchable by the sandbox identity 65534:65534 (under Landlock a path is reached through its real parents: make them searchable, or set runAs) (got "${inner}")`,
        );
      } finally {
        rmSync(closed, { recursive: true, force: true });
      }
    },
  );

  it('hands the applier each added path with the identity of the file the host checked', () => {
    const job = tempDir();
    const policy = resolveSubprocessPolicy({ allowFileWrites: true, restrictToDirectory: job });
    const { plan } = prepareLaunch({ policy, onDegraded() {} }, 'echo', [], {});
    try {
      expect(plan.confinement).toBe('landlock');
      const instructions = plan.inputs![1]!;
      if (!(instructions instanceof Uint8Array)) throw new Error('no network here: not deferred');
      const fields = Buffer.from(instructions).toString().split('\0');
      const at = fields.findIndex((field, index) => field === job && fields[index - 2] === 'path');
      const { dev, ino } = statSync(job);
      expect(fields.slice(at - 2, at + 2)).toEqual(['path', String(0xffff), job, `${dev}:${ino}`]);
    } finally {
      releasePlan(plan);
    }
  });

  it('refuses to run without bubblewrap in strict mode', async () => {
    const sandbox = createSandbox({ strict: true });
    const result = await sandbox.run('echo', ['never']);
    expect(result).toMatchObject({
      success: false,
      code: 'UNAVAILABLE',
      sandboxApplied: false,
      stdout: '',
      error: `Refusing to run under landlock (strict policy needs bubblewrap): ${
        process.getuid?.() === 0
          ? 'bubblewrap: bwrap not found on PATH; bubblewrap as the caller: bwrap not found on PATH'
          : 'bubblewrap: bwrap not found on PATH'
      }`,
    });
    expect(() => sandbox.spawn('echo', ['never'])).toThrow(SandboxUnavailableError);
    expect(sandbox.execSync('echo never').error).toBe(result.error);
  });
});
