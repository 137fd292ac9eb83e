// The set-id sweep against a run that fills one directory with names (attack review, stop 36).
// The sweep ran synchronously on the host's thread after every run over each writable
// directory, and read a whole directory before counting it against its 50 000-entry bound
// (readdirSync): a directory of 600 000 names stalled the host's event loop 2.2–3.8 s, and
// 49 990 names 0.9–2.3 s, after every run on it, and every other run's timeouts and output
// with it. It now runs on libuv's thread pool, a name at a time, and stops at the bound.
import { describe, expect, it } from 'vitest';
import { createSandbox } from '../src/index.ts';
import { python, tempDir } from './support/helpers.ts';

/** Python that makes `count` empty files of about 200-byte names in its cwd, numbered from `from`. */
const fill = (from: number, count: number) => `
import os
pad = "n" * 190
for i in range(${from}, ${from + count}):
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

describe('the set-id sweep of a directory a run filled up to its bound, then past it', () => {
  it('walks 49 990 entries off the host thread (claimed, no stall); past 50 000 it stops (not claimed, no stall)', async () => {
    // Within the bound the sweep checks every entry (open, fstat, close): done synchronously on
    // the host's thread it stalled the event loop 0.9 s after every run on such a directory, and
    // past it (600 000 names) 3.5 s, reading the whole directory first (attack review, stop 36).
    // execSync still sweeps synchronously (it blocks anyway). One directory serves both halves:
    // filling it is most of this test's time.
    const writable = tempDir('/var/tmp');
    const sandbox = createSandbox({
      restrictToDirectory: writable,
      allowNetwork: false,
      timeoutMs: 120_000,
    });
    const laterRun = async () => {
      let later: Awaited<ReturnType<typeof sandbox.run>> | undefined;
      const stall = await longestStall(async () => {
        later = await sandbox.run('/bin/true');
      });
      return {
        success: later?.success,
        claimed: later?.controls.includes('no-setid-files'),
        stall,
      };
    };
    const within = 49_990;
    const filled = await sandbox.run(python, ['-c', fill(0, within)]);
    expect({ success: filled.success, stdout: filled.stdout }).toEqual({
      success: true,
      stdout: `made ${within}\n`,
    });
    const first = await laterRun();
    expect([first.success, first.claimed]).toEqual([true, true]);
    expect(first.stall).toBeLessThan(400);
    // 110 more: the walk meets its bound, stops there, and does not say the directory is clean.
    const more = await sandbox.run(python, ['-c', fill(within, 110)]);
    expect(more.success).toBe(true);
    const past = await laterRun();
    expect([past.success, past.claimed]).toEqual([true, false]);
    expect(past.stall).toBeLessThan(400);
    await sandbox.close();
  }, 180_000);
});
