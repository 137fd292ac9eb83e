// Every failed result carries a code from core's table, the same whichever way the command
// failed to run to a clean exit; a closed sandbox (`await using`) kills what it started.
import { describe, expect, it } from 'vitest';
import { createSandbox, type SandboxResult } from '../src/index.ts';
import { settledProcesses, token } from './support/helpers.ts';

/** The fields a caller branches on. */
function outcome(result: SandboxResult) {
  return { success: result.success, code: result.code, error: result.error };
}

describe('result codes', () => {
  const sandbox = createSandbox({ timeoutMs: 5_000 });

  it('leaves a success without code or error', async () => {
    const result = await sandbox.run('/bin/true');
    expect(outcome(result)).toEqual({ success: true, code: undefined, error: undefined });
    expect(result.exitCode).toBe(0);
  });

  it('reports a non-zero exit as RUNTIME', async () => {
    expect(outcome(await sandbox.run('/bin/sh', ['-c', 'exit 3']))).toEqual({
      success: false,
      code: 'RUNTIME',
      error: 'Command failed with exit code 3',
    });
  });

  it('reports a command a signal ended as CRASH, also through bubblewrap’s 128 + n', async () => {
    const result = await sandbox.run('/bin/sh', ['-c', 'kill -SEGV $$']);
    expect(outcome(result)).toEqual({
      success: false,
      code: 'CRASH',
      error: 'Command was killed with SIGSEGV',
    });
    expect(result.exitCode).toBe(128 + 11);
  });

  it('does not name the CPU limit for a SIGXCPU the command sent itself, nor for its exit 152', async () => {
    // Found by an attack review: both read "killed with SIGXCPU (CPU time limit)", TIMEOUT,
    // after a few milliseconds of a 5 s limit (bubblewrap reports both as 152). The kernel's own
    // SIGXCPU is in prestart-cpu-limit.test.ts.
    const limited = createSandbox({ timeoutMs: 5_000, rlimits: { cpuSecs: 5 } });
    const results = [
      await limited.run('/bin/sh', ['-c', 'kill -XCPU $$']),
      await limited.run('/bin/sh', ['-c', 'exit 152']),
    ];
    const notTheLimit = {
      success: false,
      code: 'CRASH',
      error: 'Command was killed with SIGXCPU (not by its CPU time limit)',
    };
    expect(results.map(outcome)).toEqual([notTheLimit, notTheLimit]);
  });

  it('reports the file size limit as LIMIT_EXCEEDED', async () => {
    const limited = createSandbox({ rlimits: { fileSizeBytes: 4096 } });
    const result = await limited.run('/bin/sh', ['-c', 'head -c 100000 /dev/zero > "$HOME/big"']);
    expect(outcome(result)).toEqual({
      success: false,
      code: 'LIMIT_EXCEEDED',
      error: 'Command was killed with SIGXFSZ (file size limit)',
    });
  });

  it('reports the wall-clock limit as TIMEOUT and an abort as CANCELLED', async () => {
    const timedOut = await sandbox.run('/bin/sleep', ['100'], { timeoutMs: 300 });
    expect(outcome(timedOut)).toEqual({
      success: false,
      code: 'TIMEOUT',
      error: 'Command timed out after 300 ms',
    });
    const cancelled = await sandbox.run('/bin/sleep', ['100'], {
      signal: AbortSignal.timeout(200),
    });
    expect(outcome(cancelled)).toEqual({
      success: false,
      code: 'CANCELLED',
      error: 'Command was cancelled',
    });
  });

  it('reports a command that never started as UNAVAILABLE', async () => {
    const result = await sandbox.run('/no/such/program');
    expect(result).toMatchObject({ success: false, code: 'UNAVAILABLE', exitCode: null });
    expect(result.error).toContain('/no/such/program');
    expect(sandbox.execSync('/no/such/program')).toMatchObject({ code: 'UNAVAILABLE' });
  });

  it('reports output that ended an execSync as LIMIT_EXCEEDED', () => {
    const result = sandbox.execSync('head -c 5000 /dev/zero', { maxOutputBytes: 1000 });
    expect(outcome(result)).toEqual({
      success: false,
      code: 'LIMIT_EXCEEDED',
      error: 'Output exceeded 1000 bytes; the command was killed',
    });
  });
});

describe('closing a sandbox', () => {
  it('kills what it started when an `await using` block ends, then refuses new commands', async () => {
    const tag = token();
    let outlived: ReturnType<typeof createSandbox> | undefined;
    let running: Promise<SandboxResult> | undefined;
    {
      await using sandbox = createSandbox({ timeoutMs: 0 });
      outlived = sandbox;
      running = sandbox.run('/bin/sh', ['-c', `sleep 100 # ${tag}`]);
      await new Promise((resolve) => setTimeout(resolve, 150));
    }
    expect(outcome(await running)).toEqual({
      success: false,
      code: 'CANCELLED',
      error: 'Command was cancelled',
    });
    expect(await settledProcesses(tag)).toEqual([]);
    expect(outcome(await outlived.run('/bin/true'))).toEqual({
      success: false,
      code: 'UNAVAILABLE',
      error: 'The sandbox is closed',
    });
    expect(outlived.execSync('/bin/true').code).toBe('UNAVAILABLE');
    expect(() => outlived.spawn('/bin/true')).toThrow('The sandbox is closed');
    await outlived.close(); // a second close is harmless
  });
});
