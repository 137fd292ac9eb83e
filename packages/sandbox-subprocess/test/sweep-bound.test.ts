// The set-id sweep's bound against a run that fills one directory with names (attack review,
// stop 36). The sweep runs synchronously on the host's thread after every run over each writable
// directory, and promises to stop after 50 000 entries. It read a whole directory before
// counting it (readdirSync), so a directory of 600 000 names was read in full, every time a
// run on that directory ended: the host's event loop stood still for over two seconds, and
// with it every other run's timeouts and output (measured 0.73 s for 200 000 names of 200 bytes,
// 2.2 s for 600 000). The bound must bound the work, not just the result.
import { describe, expect, it } from 'vitest';
import { createSandbox } from '../src/index.ts';
import { python, tempDir } from './support/helpers.ts';

const names = 600_000;
/** Python that makes `count` empty files of about 200-byte names in its cwd. */
const fill = (count: number) => `
import os
pad = "n" * 190
for i in range(${count}):
    os.close(os.open("%d%s" % (i, pad), os.O_CREAT | os.O_WRONLY, 0o644))
print("made", ${count}, flush=True)
`;

/** The longest the host's event loop went without running a 5 ms timer while `work` ran. */
async function longestStall(work: () => Promise<unknown>): Promise<number> {
  let last = performance.now();
  let longest = 0;
  const timer = setInterval(() => {
    const now = performance.now();
    longest = Math.max(longest, now - last);
    last = now;
  }, 5);
  try {
    await work();
  } finally {
    clearInterval(timer);
  }
  return longest;
}

describe('the set-id sweep of a directory a run filled with names', () => {
  it('reads no more than its bound: the host is not stalled, the control is not claimed', async () => {
    const writable = tempDir('/var/tmp');
    const sandbox = createSandbox({
      restrictToDirectory: writable,
      allowNetwork: false,
      timeoutMs: 120_000,
    });
    const filled = await sandbox.run(python, ['-c', fill(names)]);
    expect({ success: filled.success, stdout: filled.stdout }).toEqual({
      success: true,
      stdout: `made ${names}\n`,
    });
    expect(filled.controls).not.toContain('no-setid-files');
    // A later run on the same directory (the names stay) sweeps it again.
    let later: Awaited<ReturnType<typeof sandbox.run>> | undefined;
    const stall = await longestStall(async () => {
      later = await sandbox.run('/bin/true');
    });
    expect(later?.success).toBe(true);
    expect(later?.controls).not.toContain('no-setid-files');
    // Reading 50 000 names of 200 bytes takes about 0.2 s here; reading 600 000 took 2.2 s.
    expect(stall).toBeLessThan(600);
    await sandbox.close();
  }, 180_000);
});

describe('the set-id sweep of a directory a run filled up to the bound', () => {
  it('walks 49 990 entries off the host thread: the host is not stalled, the control is claimed', async () => {
    // Within the bound the sweep checks every entry (open, fstat, close): done synchronously on
    // the host's thread it stalled the event loop 0.9 s after every run on such a directory
    // (attack review, stop 36). execSync still sweeps synchronously (it blocks anyway).
    const writable = tempDir('/var/tmp');
    const sandbox = createSandbox({
      restrictToDirectory: writable,
      allowNetwork: false,
      timeoutMs: 120_000,
    });
    const count = 49_990;
    const filled = await sandbox.run(python, ['-c', fill(count)]);
    expect({ success: filled.success, stdout: filled.stdout }).toEqual({
      success: true,
      stdout: `made ${count}\n`,
    });
    let later: Awaited<ReturnType<typeof sandbox.run>> | undefined;
    const stall = await longestStall(async () => {
      later = await sandbox.run('/bin/true');
    });
    expect(later?.success).toBe(true);
    expect(later?.controls).toContain('no-setid-files');
    expect(stall).toBeLessThan(400);
    await sandbox.close();
  }, 180_000);
});
