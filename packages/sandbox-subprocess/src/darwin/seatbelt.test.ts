// macOS cannot run here: these tests pin the exact argv and profile that would run there.
import { describe, expect, it } from 'vitest';
import { launchRequest } from '../../test/support/launch-request.ts';
import { darwinPlan, seatbeltProfile } from './seatbelt.ts';

describe('Seatbelt (generated, untested on a real Mac)', () => {
  it('writes a deny-default profile without network and with writes only to parameters', () => {
    expect(seatbeltProfile({ allowNetwork: false, allowFileWrites: true })).toBe(
      [
        '(version 1)',
        '(deny default)',
        '(allow process-exec)',
        '(allow process-fork)',
        '(allow signal (target same-sandbox))',
        '(allow file-read*)',
        '(allow sysctl-read)',
        '(allow mach-lookup)',
        '(allow ipc-posix-shm)',
        '(allow file-write-data (literal "/dev/null") (literal "/dev/zero") (literal "/dev/dtracehelper"))',
        '(allow file-write* (subpath (param "WRITABLE_DIR")) (subpath (param "TMP_DIR")))',
        '(allow network-outbound (remote unix-socket))',
        '(allow system-socket (socket-domain AF_UNIX))',
        '',
      ].join('\n'),
    );
    const open = seatbeltProfile({ allowNetwork: true, allowFileWrites: false });
    expect(open).not.toContain('file-write*');
    expect(open).toContain(
      '(allow network-outbound)\n(allow network-inbound)\n(allow system-socket)\n',
    );
  });

  it('runs sandbox-exec behind ulimits, with paths as -D parameters', () => {
    const plan = darwinPlan(
      launchRequest({ allowNetwork: false, maxMemoryMb: 256, timeoutMs: 1000 }),
    );
    expect(plan.file).toBe('/bin/sh');
    expect(plan.args).toEqual([
      '-c',
      'ulimit -S -t 30 && ulimit -H -t 31 && ulimit -n 1024 && ulimit -f 2097152 && ulimit -c 0 && ulimit -u 256 && ulimit -d 262144 && exec "$@"',
      'coda-sandbox',
      '/usr/bin/sandbox-exec',
      '-p',
      seatbeltProfile({ allowNetwork: false, allowFileWrites: true }),
      '-D',
      'WRITABLE_DIR=/Users/dev/project',
      '-D',
      'TMP_DIR=/private/var/folders/xy/T/',
      '/usr/bin/python3',
      '-c',
      "print('it''s 1')",
    ]);
    expect(plan.controls).toEqual([
      'clean-environment',
      'rlimit-cpu',
      'rlimit-nofile',
      'rlimit-fsize',
      'rlimit-core',
      'rlimit-nproc',
      'rlimit-data',
      'memory:ulimit',
      'seatbelt',
      'seatbelt:no-network',
      'seatbelt:write-restricted',
      'wall-clock-timeout',
      'kill:process-group',
    ]);
    expect(plan).toMatchObject({ sandboxApplied: true, detached: true });
  });

  it('runs the command plainly when the policy is disabled', () => {
    const plan = darwinPlan(launchRequest({ enabled: false }));
    expect([plan.file, ...plan.args]).toEqual(['/usr/bin/python3', '-c', "print('it''s 1')"]);
    expect(plan).toMatchObject({
      sandboxApplied: false,
      fallbackReason: 'sandbox disabled by policy',
    });
  });
});
