// No set-id file outlives a run: seccomp refuses every call that would set a set-user-id or
// set-group-id bit (chmod family, open/creat modes, mknod), and after the run the writable
// directory is swept for any that appeared another way (a directory made inside a set-group-id
// one inherits the bit from the kernel, with no mode asking for it).
import { chmodSync, existsSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { createSandbox, SandboxControl } from '../src/index.ts';
import { python, sandboxDir, tempDir } from './support/helpers.ts';

const setIdBits = 0o6000;
const bitsOf = (path: string): number => statSync(path).mode & 0o7777;

describe('set-id files in the writable directory', () => {
  it('refuses set-id bits at the syscall: chmod, open with a mode, mknod, tar -p', async () => {
    const dir = tempDir('/var/tmp');
    const sandbox = createSandbox({ allowFileWrites: true, restrictToDirectory: dir });
    const code = [
      'import errno, os, stat, subprocess',
      'def attempt(action):',
      '    try:',
      '        action(); return "ok"',
      '    except OSError as error:',
      '        return errno.errorcode[error.errno]',
      'open("f", "w").close(); os.mkdir("d")',
      'print(attempt(lambda: os.chmod("f", 0o4755)), attempt(lambda: os.chmod("f", 0o2755)), attempt(lambda: os.chmod("d", 0o2775)))',
      'print(attempt(lambda: os.close(os.open("g", os.O_CREAT | os.O_WRONLY, 0o4755))), os.path.exists("g"))',
      'print(attempt(lambda: os.mknod("fifo", stat.S_IFIFO | 0o2644)), attempt(lambda: os.mknod("tty", stat.S_IFCHR | 0o666, os.makedev(5, 0))))',
      'print(attempt(lambda: os.chmod("f", 0o1755)), oct(os.stat("f").st_mode & 0o7777))',
    ].join('\n');
    const result = await sandbox.run(python, ['-c', code]);
    expect(result.stderr).toBe('');
    expect(result.stdout).toBe('EPERM EPERM EPERM\nEPERM False\nEPERM EPERM\nok 0o1755\n');
    expect(bitsOf(join(dir, 'f'))).toBe(0o1755);
    expect(existsSync(join(dir, 'tty'))).toBe(false);
    expect(result.controls).toContain(SandboxControl.noSetIdFiles);
  });

  it('tar -p of an archive with a set-uid file leaves none', async () => {
    const dir = tempDir('/var/tmp');
    const source = tempDir('/var/tmp');
    writeFileSync(join(source, 'tool'), '#!/bin/sh\n');
    chmodSync(join(source, 'tool'), 0o4755);
    const sandbox = createSandbox({ allowFileWrites: true, restrictToDirectory: dir });
    const result = await sandbox.run(
      '/bin/sh',
      ['-c', `tar -C ${source} -cf - tool | tar -xpf -; echo $?`],
      {
        readOnlyPaths: [source],
      },
    );
    expect(result.stdout).toBe('2\n');
    expect(result.stderr).toMatch(/tool: Cannot change mode to rwsr-xr-x: Operation not permitted/);
    expect(bitsOf(join(dir, 'tool')) & setIdBits).toBe(0);
  });

  it('sweeps afterwards what the kernel set by itself: a directory made in a set-gid one', async () => {
    const dir = tempDir('/var/tmp');
    const shared = sandboxDir(join(dir, 'shared'));
    chmodSync(shared, 0o2777); // planted by the host before the run
    const sandbox = createSandbox({ allowFileWrites: true, restrictToDirectory: dir });
    const result = await sandbox.run('/bin/sh', [
      '-c',
      'mkdir shared/sub && stat -c %a shared/sub',
    ]);
    // Inside, the kernel gave the new directory the parent's set-gid bit; after, neither has it.
    expect(result.stdout).toBe('2755\n');
    expect(bitsOf(join(shared, 'sub'))).toBe(0o755);
    expect(bitsOf(shared)).toBe(0o777);
    expect(result.controls).toContain(SandboxControl.noSetIdFiles);
    const sync = sandbox.execSync('/bin/sh -c "chmod 2777 shared; true"');
    expect(sync.controls).toContain(SandboxControl.noSetIdFiles);
  });

  it('a run without a writable directory has nothing to sweep and does not claim it', async () => {
    const result = await createSandbox({ allowFileWrites: false }).run('/bin/true');
    expect(result.controls).not.toContain(SandboxControl.noSetIdFiles);
  });
});
