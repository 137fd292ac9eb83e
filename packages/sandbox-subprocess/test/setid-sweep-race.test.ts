// The set-id sweep against a run that is still renaming entries while it walks (another run
// sharing the writable directory): the attack review's race, on the real filesystem. A
// flipper swaps a directory and a symlink to a host directory of set-uid files with
// renameat2(RENAME_EXCHANGE) as fast as it can; the directory's own entries are symlinks to a
// host secret. A sweep that looks a name up twice, or follows a symlink anywhere in a path,
// changes host files: the set-uid files lose their bit, or the secret gets their mode.
import { spawn } from 'node:child_process';
import { chmodSync, linkSync, mkdirSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import { sweepSetIdFiles } from '../src/linux/setid-sweep.ts';
import { python, tempDir } from './support/helpers.ts';

const bitsOf = (path: string): number => statSync(path).mode & 0o7777;
const targets = 200;

const flipper = `
import ctypes, sys, time
renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
end = time.time() + float(sys.argv[1])
print("flipping", flush=True)
while time.time() < end:
    if renameat2(-100, b"L", -100, b"S", 2) != 0:
        sys.exit("renameat2: " + str(ctypes.get_errno()))
`;

describe('the set-id sweep of a directory another run still changes', () => {
  it('never changes a file outside it: no symlink followed, no name looked up twice', async () => {
    const writable = tempDir('/var/tmp');
    const host = tempDir('/var/tmp');
    const setUid = join(host, 'bin');
    mkdirSync(setUid);
    for (let n = 0; n < targets; n++) {
      writeFileSync(join(setUid, `s${n}`), '');
      chmodSync(join(setUid, `s${n}`), 0o4755);
    }
    const secret = join(host, 'secret');
    writeFileSync(secret, 'root only\n');
    chmodSync(secret, 0o600);
    // Files before L slow each sweep down, which widens every window between two looks.
    for (let n = 0; n < 2_000; n++) writeFileSync(join(writable, `f${n}`), '');
    mkdirSync(join(writable, 'L'));
    for (let n = 0; n < targets; n++) symlinkSync(secret, join(writable, 'L', `s${n}`));
    symlinkSync(setUid, join(writable, 'S'));

    const child = spawn(python, ['-c', flipper, '20'], { cwd: writable, stdio: 'pipe' });
    onTestFinished(() => {
      child.kill('SIGKILL');
    });
    await new Promise((resolve) => child.stdout.once('data', resolve));
    const started = performance.now();
    let sweeps = 0;
    let changed: string[] = [];
    while (performance.now() - started < 6_000 && changed.length === 0) {
      sweepSetIdFiles([writable]);
      sweeps++;
      changed = [
        secret,
        ...Array.from({ length: targets }, (_, n) => join(setUid, `s${n}`)),
      ].filter((path) => bitsOf(path) !== (path === secret ? 0o600 : 0o4755));
      // Let the flipper run between sweeps on a 2-core machine.
      await new Promise((resolve) => setImmediate(resolve));
    }
    expect({ changed, sweptAtLeast: sweeps >= 20 }).toEqual({ changed: [], sweptAtLeast: true });
  }, 30_000);

  it('clears set-gid directories whose names are not UTF-8, and what they hold', () => {
    // Found by a review of the sweep: listed as UTF-8, such a name was opened as another, taken
    // for gone and skipped with all it held, and the sweep still said it was complete.
    const writable = tempDir('/var/tmp');
    /** `writable/NAME` for a name given as raw bytes. */
    const inside = (name: number[]) =>
      Buffer.concat([Buffer.from(`${writable}/`), Buffer.from(name)]);
    const dir = inside([0xff]);
    const outer = inside([0x64, 0xfe]);
    const inner = Buffer.concat([outer, Buffer.from('/inner')]);
    for (const at of [dir, outer, inner]) {
      mkdirSync(at);
      chmodSync(at, 0o2775);
    }
    const sweep = sweepSetIdFiles([writable]);
    const bits = (at: Buffer) => statSync(at).mode & 0o7777;
    expect({
      complete: sweep.complete,
      cleared: sweep.cleared.length,
      modes: [bits(dir), bits(outer), bits(inner)],
    }).toEqual({ complete: true, cleared: 3, modes: [0o775, 0o775, 0o775] });
  });

  it("leaves a set-id file (a hard link of a file elsewhere, or the host's) and says so", () => {
    const writable = tempDir('/var/tmp');
    const host = tempDir('/var/tmp');
    writeFileSync(join(host, 'tool'), '');
    chmodSync(join(host, 'tool'), 0o4755);
    linkSync(join(host, 'tool'), join(writable, 'tool'));
    // One name only proves nothing either: a review linked and unlinked a host file in a loop.
    writeFileSync(join(writable, 'placed'), '');
    chmodSync(join(writable, 'placed'), 0o2755);
    mkdirSync(join(writable, 'shared'));
    chmodSync(join(writable, 'shared'), 0o2775);
    const sweep = sweepSetIdFiles([writable]);
    expect({
      sweep,
      tool: bitsOf(join(host, 'tool')),
      placed: bitsOf(join(writable, 'placed')),
      shared: bitsOf(join(writable, 'shared')),
    }).toEqual({
      sweep: { complete: false, cleared: [join(writable, 'shared')] },
      tool: 0o4755,
      placed: 0o2755,
      shared: 0o775,
    });
  });
});
