import { SandboxValidationError, silentLogger } from '@coda/sandbox-core';
import { describe, expect, it } from 'vitest';
import { createSandbox, extraSyscallsWarning } from '../sandbox.ts';
import { defaultSubprocessPolicy, resolveSubprocessPolicy } from './subprocess-policy.ts';

function issuesOf(action: () => unknown): { path: string; message: string; received: string }[] {
  try {
    action();
  } catch (error) {
    expect(error).toBeInstanceOf(SandboxValidationError);
    return [...(error as SandboxValidationError).issues];
  }
  throw new Error('expected a SandboxValidationError');
}

describe('subprocess policy', () => {
  it('extends the seed policy with its defaults', () => {
    expect(resolveSubprocessPolicy()).toEqual({
      enabled: true,
      timeoutMs: 30_000,
      maxMemoryMb: 512,
      allowNetwork: true,
      allowFileWrites: true,
      strict: false,
      minimumConfinement: 'landlock',
      maxOutputBytes: 4_194_304,
      allowedEnv: ['PATH', 'LANG', 'LC_ALL', 'LC_CTYPE', 'TZ', 'TERM'],
      env: {},
      rlimits: { cpuSecs: 0, openFiles: 1024, processes: 256, fileSizeBytes: 1_073_741_824 },
      extraSyscalls: [],
      hidePaths: [],
      readOnlyPaths: [],
      writablePaths: [],
      allowUnixSockets: [],
    });
    expect(Object.isFrozen(defaultSubprocessPolicy)).toBe(true);
  });

  it('allowedSyscalls only narrows: a call the default refuses needs extraSyscalls', () => {
    expect(
      issuesOf(() => resolveSubprocessPolicy({ allowedSyscalls: ['read', 'ptrace'] })),
    ).toEqual([
      {
        path: 'allowedSyscalls.1',
        message: 'refused by the default seccomp allowlist (name it in extraSyscalls to allow it)',
        received: '"ptrace"',
      },
    ]);
    const widened = resolveSubprocessPolicy({
      allowedSyscalls: ['read', 'ptrace'],
      extraSyscalls: ['ptrace'],
    });
    expect(widened.extraSyscalls).toEqual(['ptrace']);
  });

  it('extraSyscalls: refused for argument-ruled and probed calls, and under strict', () => {
    expect(
      issuesOf(() =>
        resolveSubprocessPolicy({ extraSyscalls: ['socket', 'clone3', 'read', 'nope'] }),
      ),
    ).toEqual([
      {
        path: 'extraSyscalls.0',
        message: 'decided by its arguments; cannot be widened',
        received: '"socket"',
      },
      {
        path: 'extraSyscalls.1',
        message: 'refused with ENOSYS so programs fall back; cannot be widened',
        received: '"clone3"',
      },
      {
        path: 'extraSyscalls.2',
        message: 'already allowed by the default filter',
        received: '"read"',
      },
      {
        path: 'extraSyscalls.3',
        message: 'unknown syscall on x86_64 and aarch64',
        received: '"nope"',
      },
    ]);
    expect(
      issuesOf(() => resolveSubprocessPolicy({ strict: true, extraSyscalls: ['ptrace'] })),
    ).toEqual([
      {
        path: 'extraSyscalls',
        message: 'a strict policy cannot widen the seccomp allowlist',
        received: '[array of 1]',
      },
    ]);
  });

  it('logs a widening each time a sandbox takes it', () => {
    const warnings: unknown[][] = [];
    const logger = { ...silentLogger, warn: (...args: unknown[]) => void warnings.push(args) };
    const sandbox = createSandbox({ extraSyscalls: ['ptrace'] }, { logger });
    sandbox.updatePolicy({ timeoutMs: 5 });
    expect(warnings).toEqual([
      [{ extraSyscalls: ['ptrace'] }, extraSyscallsWarning],
      [{ extraSyscalls: ['ptrace'] }, extraSyscallsWarning],
    ]);
  });

  it('merges rlimits field by field', () => {
    const policy = resolveSubprocessPolicy({ rlimits: { processes: 32 }, timeoutMs: 5 });
    expect(policy.rlimits).toEqual({ ...defaultSubprocessPolicy.rlimits, processes: 32 });
    expect(policy.timeoutMs).toBe(5);
  });

  it('names every bad field in one error', () => {
    const issues = issuesOf(() =>
      createSandbox({
        timeoutMs: -1,
        maxMemoryMb: 1.5,
        allowedSyscalls: ['read', 'not_a_syscall', 'Bad Name'],
        rlimits: { openFiles: 1 },
        hidePaths: ['relative'],
        bogus: true,
      } as never),
    );
    expect(issues.map((issue) => issue.path)).toEqual([
      'timeoutMs',
      'maxMemoryMb',
      'allowedSyscalls.1',
      'allowedSyscalls.2',
      'rlimits.openFiles',
      'hidePaths.0',
      'bogus',
    ]);
    expect(issues[2]).toEqual({
      path: 'allowedSyscalls.1',
      message: 'unknown syscall on x86_64 and aarch64',
      received: '"not_a_syscall"',
    });
  });

  it('accepts only the Linux backends as minimumConfinement', () => {
    expect(createSandbox({ minimumConfinement: 'rlimits' }).getPolicy().minimumConfinement).toBe(
      'rlimits',
    );
    const issues = issuesOf(() => createSandbox({ minimumConfinement: 'seccomp' } as never));
    expect(issues).toEqual([
      {
        path: 'minimumConfinement',
        message:
          'Invalid option: expected one of "bubblewrap"|"bubblewrap-as-caller"|"landlock"|"rlimits"',
        received: '"seccomp"',
      },
    ]);
  });

  it('keeps the old policy when an update is invalid', () => {
    const sandbox = createSandbox({ timeoutMs: 1000 });
    expect(() => sandbox.updatePolicy({ timeoutMs: Number.NaN })).toThrow(SandboxValidationError);
    expect(sandbox.getPolicy().timeoutMs).toBe(1000);
    sandbox.updatePolicy({ allowNetwork: false });
    expect(sandbox.getPolicy()).toMatchObject({ timeoutMs: 1000, allowNetwork: false });
    expect(sandbox.getPlatform()).toBe(process.platform);
  });

  it('validates run options and commands', async () => {
    const sandbox = createSandbox();
    await expect(
      sandbox.run('/bin/true', [], { cwd: '/definitely/missing', extraPipes: 2 } as never),
    ).rejects.toMatchObject({
      code: 'VALIDATION',
      issues: [{ path: 'extraPipes', message: 'unknown option', received: '2' }],
    });
    await expect(
      sandbox.run('/bin/true', [], { cwd: '/definitely/missing' }),
    ).rejects.toMatchObject({
      issues: [{ path: 'cwd', message: 'path does not exist' }],
    });
    await expect(sandbox.exec('   ')).rejects.toBeInstanceOf(SandboxValidationError);
    expect(() => sandbox.spawn('', [])).toThrow(SandboxValidationError);
    expect(() => sandbox.spawn('/bin/true', [], { cwd: '/' })).toThrow(
      'Invalid spawn options: cwd: the writable directory cannot be / (set restrictToDirectory or allowFileWrites: false) (got "/")',
    );
    // A read-only cwd of / would bind the whole host into the view.
    expect(() =>
      createSandbox({ allowFileWrites: false }).spawn('/bin/true', [], { cwd: '/' }),
    ).toThrow('Invalid spawn options: cwd: binding / would show the whole host (got "/")');
    const restricted = createSandbox({ restrictToDirectory: '/tmp' });
    expect(() => restricted.spawn('/bin/true', [], { cwd: '/' })).toThrow(
      /cwd: outside restrictToDirectory/,
    );
  });
});
