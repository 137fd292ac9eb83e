// What one run can learn of another through the view they share (attack review, stop 36).
// Under bubblewrap another run's processes are out of sight (a pid namespace each), but /usr and
// /etc are the host's directories bound read-only into every run: inotify watches their
// inodes, and the kernel reports every open and read of a file in a watched directory by any
// process of the machine. A run watching /usr/bin and /etc with IN_OPEN | IN_ACCESS saw, by
// name and as they happened, the programs another SubprocessSandbox's runs executed and the
// files they read (measured: base32, cat, hostname, and the helpers bash, bwrap, setpriv, env).
// Not fixed: seccomp could refuse inotify_add_watch with IN_OPEN, IN_ACCESS or IN_CLOSE_NOWRITE
// in its mask (reads by others; watchers of a writable directory mostly ask for modifications),
// which would refuse inotifywait's default and recent Python watchdog, whose masks include them.
import { describe, expect, it } from 'vitest';
import { createSandbox } from '../src/index.ts';
import { python } from './support/helpers.ts';

const watcher = `
import ctypes, os, select, struct, sys
libc = ctypes.CDLL(None, use_errno=True)
fd = libc.inotify_init1(os.O_NONBLOCK)
IN_ACCESS, IN_OPEN = 0x1, 0x20
watches = [libc.inotify_add_watch(fd, d, IN_OPEN | IN_ACCESS) for d in (b"/usr/bin", b"/etc")]
print("watching", flush=True)
seen = set()
while True:
    ready, _, _ = select.select([fd, 0], [], [])
    if 0 in ready and not os.read(0, 1):
        break
    if fd in ready:
        data, i = os.read(fd, 65536), 0
        while i < len(data):
            _, _, _, size = struct.unpack_from("iIII", data, i)
            seen.add(data[i + 16 : i + 16 + size].rstrip(b"\\0").decode())
            i += 16 + size
print(" ".join(sorted(seen)))
`;

describe("another run's activity in the shared view", () => {
  // Known, not fixed (docs/security.md, "Hide one run's file activity from another"): it.fails
  // holds the measured break, and turns red the day a mask rule or a private view fixes it.
  it.fails('is not reported to a run watching /usr/bin and /etc', async () => {
    const watching = createSandbox({ allowNetwork: false, timeoutMs: 30_000 });
    const other = createSandbox({ allowNetwork: false, timeoutMs: 30_000 });
    const watch = watching.spawn(python, ['-c', watcher]);
    let output = '';
    watch.stdout.on('data', (chunk: Buffer) => {
      output += chunk.toString();
    });
    await new Promise<void>((resolve) => watch.stdout.once('data', () => resolve()));
    // A program nothing else on the machine runs, and a file of /etc it reads.
    const ran = await other.run('/usr/bin/base32', ['/etc/hostname']);
    expect(ran.success).toBe(true);
    watch.stdin.end();
    await watch.exited;
    const seen = (output.split('\n')[1] ?? '').split(' ');
    expect(seen).not.toContain('base32');
    expect(seen).not.toContain('hostname');
    await watching.close();
    await other.close();
  }, 60_000);
});
