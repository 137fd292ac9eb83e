// The seed's synchronous API on the same plans: confinement, timeouts and cleanup.
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { createSandbox, SandboxControl } from '../src/index.ts';
import { settledProcesses, token } from './support/helpers.ts';

const daemonScript = join(import.meta.dirname, 'fixtures', 'daemon.sh');

describe('execSync', () => {
  it('runs a command confined and returns the seed result', () => {
    const result = createSandbox().execSync('grep -c ^Seccomp:.2 /proc/self/status', { input: '' });
    expect(result).toMatchObject({
      success: true,
      stdout: '1\n',
      stderr: '',
      exitCode: 0,
      sandboxApplied: true,
      platform: 'linux',
      timedOut: false,
    });
    expect(result.controls).toContain(SandboxControl.seccomp);
  });

  it('passes input and reports a failing exit code as a result', () => {
    const result = createSandbox().execSync('sh -c cat;\\ exit\\ 4', { input: 'from stdin' });
    expect(result).toMatchObject({
      success: false,
      stdout: 'from stdin',
      exitCode: 4,
      error: 'Command failed with exit code 4',
    });
  });

  it('times out and leaves nothing behind', async () => {
    const tag = token();
    const result = createSandbox({ timeoutMs: 500, readOnlyPaths: [daemonScript] }).execSync(
      `sh ${daemonScript} ${tag}`,
    );
    expect(result).toMatchObject({
      success: false,
      timedOut: true,
      error: 'Command timed out after 500 ms',
    });
    expect(await settledProcesses(tag)).toEqual([]);
  });

  it('ends a command whose output exceeds the cap', () => {
    const result = createSandbox({ maxOutputBytes: 1000 }).execSync('head -c 100000 /dev/zero');
    expect(result.success).toBe(false);
    expect(result.stdoutTruncated).toBe(true);
    expect(result.stdout.length).toBe(1000);
    expect(result.error).toBe('Output exceeded 1000 bytes; the command was killed');
  });
});
