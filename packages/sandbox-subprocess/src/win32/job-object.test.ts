// Windows cannot run here: these tests pin the exact PowerShell that would run there.
import { describe, expect, it } from 'vitest';
import { launchRequest } from '../../test/support/launch-request.ts';
import { jobObjectScript, windowsPlan } from './job-object.ts';

describe('Job Object (generated, untested on real Windows)', () => {
  it('puts PowerShell in a kill-on-close job with a memory limit, then runs the command', () => {
    const script = jobObjectScript(['C:\\Tools\\tool.exe', 'a b', '"quoted"'], 268_435_456);
    const lines = script.split('\r\n');
    expect(lines.slice(-10)).toEqual([
      '$info = New-Object CodaJob+EXTENDED',
      '$info.Basic.LimitFlags = 8704',
      '$info.JobMemoryLimit = [UIntPtr]::new(268435456)',
      'if (-not [CodaJob]::SetInformationJobObject($job, 9, [ref]$info, [System.Runtime.InteropServices.Marshal]::SizeOf($info))) { exit 125 }',
      'if (-not [CodaJob]::AssignProcessToJobObject($job, [CodaJob]::GetCurrentProcess())) { exit 125 }',
      `$argv = [System.Text.Encoding]::UTF8.GetString([Convert]::FromBase64String('${Buffer.from(JSON.stringify(['C:\\Tools\\tool.exe', 'a b', '"quoted"'])).toString('base64')}')) | ConvertFrom-Json`,
      '$program = $argv[0]',
      '$rest = @($argv | Select-Object -Skip 1)',
      '& $program @rest',
      'exit $LASTEXITCODE',
    ]);
    expect(script).toContain('public static extern IntPtr CreateJobObject(IntPtr a, string n);');
    // Without a memory limit only KILL_ON_JOB_CLOSE is set.
    expect(jobObjectScript(['x'], 0)).toContain('$info.Basic.LimitFlags = 8192');
  });

  it('passes the script as -EncodedCommand (UTF-16LE base64)', () => {
    const request = launchRequest({ maxMemoryMb: 256 });
    const plan = windowsPlan(request);
    expect(plan.file).toBe('powershell.exe');
    expect(plan.args.slice(0, 6)).toEqual([
      '-NoLogo',
      '-NoProfile',
      '-NonInteractive',
      '-ExecutionPolicy',
      'Bypass',
      '-EncodedCommand',
    ]);
    const decoded = Buffer.from(plan.args[6]!, 'base64').toString('utf16le');
    expect(decoded).toBe(
      jobObjectScript(['/usr/bin/python3', '-c', "print('it''s 1')"], 268_435_456),
    );
    expect(plan.controls).toEqual([
      'clean-environment',
      'job-object',
      'memory:job-object',
      'wall-clock-timeout',
    ]);
    expect(plan.sandboxApplied).toBe(true);
  });
});
