// Windows: PowerShell puts itself in a Job Object with a memory limit and kill-on-close, then
// runs the command in the same console; killing PowerShell (the wall-clock limit) closes the
// job and ends every process in it. Generated and unit-tested here; untested on Windows.
import { SandboxControl } from '../process/controls.ts';
import type { LaunchPlan, LaunchRequest } from '../process/launch-plan.ts';

/** JOB_OBJECT_LIMIT_JOB_MEMORY | JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE (winnt.h). */
const limitFlags = 0x200 | 0x2000;

/** The PowerShell script that confines `argv` (program first) to `memoryBytes` (0 for none). */
export function jobObjectScript(argv: readonly string[], memoryBytes: number): string {
  const encodedArgv = Buffer.from(JSON.stringify(argv), 'utf8').toString('base64');
  return [
    "$ErrorActionPreference = 'Stop'",
    'Add-Type -TypeDefinition @"',
    'using System;',
    'using System.Runtime.InteropServices;',
    'public static class CodaJob {',
    '  [StructLayout(LayoutKind.Sequential)] public struct BASIC { public long PerProcessUserTimeLimit; public long PerJobUserTimeLimit; public uint LimitFlags; public UIntPtr MinimumWorkingSetSize; public UIntPtr MaximumWorkingSetSize; public uint ActiveProcessLimit; public UIntPtr Affinity; public uint PriorityClass; public uint SchedulingClass; }',
    '  [StructLayout(LayoutKind.Sequential)] public struct IO { public ulong a; public ulong b; public ulong c; public ulong d; public ulong e; public ulong f; }',
    '  [StructLayout(LayoutKind.Sequential)] public struct EXTENDED { public BASIC Basic; public IO Io; public UIntPtr ProcessMemoryLimit; public UIntPtr JobMemoryLimit; public UIntPtr PeakProcessMemoryUsed; public UIntPtr PeakJobMemoryUsed; }',
    '  [DllImport("kernel32.dll", SetLastError = true)] public static extern IntPtr CreateJobObject(IntPtr a, string n);',
    '  [DllImport("kernel32.dll", SetLastError = true)] public static extern bool SetInformationJobObject(IntPtr j, int c, ref EXTENDED i, uint l);',
    '  [DllImport("kernel32.dll", SetLastError = true)] public static extern bool AssignProcessToJobObject(IntPtr j, IntPtr p);',
    '  [DllImport("kernel32.dll")] public static extern IntPtr GetCurrentProcess();',
    '}',
    '"@',
    '$job = [CodaJob]::CreateJobObject([IntPtr]::Zero, $null)',
    '$info = New-Object CodaJob+EXTENDED',
    `$info.Basic.LimitFlags = ${memoryBytes > 0 ? limitFlags : 0x2000}`,
    `$info.JobMemoryLimit = [UIntPtr]::new(${memoryBytes})`,
    'if (-not [CodaJob]::SetInformationJobObject($job, 9, [ref]$info, [System.Runtime.InteropServices.Marshal]::SizeOf($info))) { exit 125 }',
    'if (-not [CodaJob]::AssignProcessToJobObject($job, [CodaJob]::GetCurrentProcess())) { exit 125 }',
    `$argv = [System.Text.Encoding]::UTF8.GetString([Convert]::FromBase64String('${encodedArgv}')) | ConvertFrom-Json`,
    '$program = $argv[0]',
    '$rest = @($argv | Select-Object -Skip 1)',
    '& $program @rest',
    'exit $LASTEXITCODE',
  ].join('\r\n');
}

/** The argv (`powershell -EncodedCommand ...`) and controls for Windows. */
export function windowsPlan(request: LaunchRequest): LaunchPlan {
  const { policy, limits } = request;
  const controls: SandboxControl[] = [SandboxControl.cleanEnvironment];
  if (!policy.enabled) {
    return {
      file: request.executable,
      args: request.args,
      controls,
      sandboxApplied: false,
      confinement: 'none',
      cwd: request.cwd ?? process.cwd(),
      env: request.env,
      cgroups: undefined,
      detached: false,
      fallbackReason: 'sandbox disabled by policy',
    };
  }
  const memoryBytes = limits.maxMemoryMb * 1024 * 1024;
  const script = jobObjectScript([request.executable, ...request.args], memoryBytes);
  controls.push(SandboxControl.jobObject);
  if (memoryBytes > 0) controls.push(SandboxControl.memoryJobObject);
  if (limits.timeoutMs > 0) controls.push(SandboxControl.wallClockTimeout);
  return {
    file: 'powershell.exe',
    args: [
      '-NoLogo',
      '-NoProfile',
      '-NonInteractive',
      '-ExecutionPolicy',
      'Bypass',
      '-EncodedCommand',
      Buffer.from(script, 'utf16le').toString('base64'),
    ],
    controls,
    sandboxApplied: true,
    confinement: 'job-object',
    cwd: request.cwd ?? process.cwd(),
    env: request.env,
    cgroups: undefined,
    detached: false,
    fallbackReason: undefined,
  };
}
