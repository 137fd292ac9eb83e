// Pseudo-terminals are a host-wide count (attack review, stop 36). Each run's /dev/pts is a new
// devpts instance (bubblewrap's --dev: newinstance, no `max`), and the kernel lets every
// instance but the host's own share kernel.pty.max - kernel.pty.reserve ptys (4096 - 1024 on
// this kernel's defaults). A run that opens /dev/ptmx 3 072 times (four processes of
// 1 000 descriptors, within `openFiles` and `processes`) holds all of them: every other run's
// openpty() fails with ENOSPC until it ends, and so does every container of the machine that
// mounts its own devpts. Measured: "openpty ok" alone, ENOSPC beside the holder, ok after.
import { describe, expect, it } from 'vitest';
import { createSandbox } from '../src/index.ts';
import { python } from './support/helpers.ts';

/** Opens /dev/ptmx up to `n` times from processes of 1 000 descriptors; says so; holds them. */
const holder = `
import os, sys, time
n = int(sys.argv[1])
total = 0
for k in range((n + 999) // 1000):
    r, w = os.pipe()
    if os.fork() == 0:
        held, got = [], 0
        try:
            for i in range(min(1000, n - k * 1000)):
                held.append(os.open("/dev/ptmx", os.O_RDWR | os.O_NOCTTY)); got += 1
        except OSError:
            pass
        os.write(w, b"%d" % got)
        time.sleep(60)
        os._exit(0)
    total += int(os.read(r, 16))
print("holding", flush=True)
time.sleep(60)
`;

const openpty = `
import os
try:
    os.openpty()
    print("openpty ok")
except OSError as e:
    print("openpty", e.strerror)
`;

describe('pseudo-terminals another run holds', () => {
  // Known, not fixed (docs/security.md, "Keep host-wide kernel pools apart"): it.fails holds the
  // measured break, and turns red the day a devpts `max` (or no ptys by default) fixes it.
  it.fails("leave a concurrent run's openpty working", async () => {
    const sandbox = createSandbox({ allowNetwork: false, timeoutMs: 60_000 });
    const alone = await sandbox.run(python, ['-c', openpty]);
    expect(alone.stdout).toBe('openpty ok\n');
    const held = sandbox.spawn(python, ['-c', holder, '3100']);
    await new Promise<void>((resolve) => held.stdout.once('data', () => resolve()));
    const beside = await sandbox.run(python, ['-c', openpty]);
    held.kill();
    await held.exited;
    expect(beside.stdout).toBe('openpty ok\n');
    await sandbox.close();
  }, 90_000);
});
