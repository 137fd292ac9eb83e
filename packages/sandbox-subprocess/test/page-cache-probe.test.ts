// The page cache of the files every run shares, as a side channel between runs (attack review,
// stop 36). The allowlist refuses `cachestat` as "a side channel on other tenants", but
// preadv2 with RWF_NOWAIT answers the same question: EAGAIN when a page of the file is not in
// the page cache, the bytes when it is. With posix_fadvise(DONTNEED), which drops a file's
// clean pages whoever reads it, a run empties a shared library's page, waits, and learns
// whether another run (or the host) read it meanwhile (measured: "not cached" after the
// eviction, "cached" after another sandbox's `head -c 100` of the file). RWF_NOWAIT is now
// refused with EOPNOTSUPP, what a file that cannot honour it answers, so programs fall back.
import { describe, expect, it } from 'vitest';
import { createSandbox } from '../src/index.ts';
import { python } from './support/helpers.ts';

/** A file of /usr/lib that the view holds, read by this test only. */
const shared = '/usr/lib/x86_64-linux-gnu/libgcrypt.so.20';

const probe = `
import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
def state():
    try:
        os.preadv(fd, [bytearray(4096)], 0, os.RWF_NOWAIT)
        return "cached"
    except BlockingIOError:
        return "not cached"
    except OSError as e:
        return "refused " + str(e.errno)
os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
print(state(), flush=True)
sys.stdin.read()
print(state(), flush=True)
`;

// EOPNOTSUPP from the kernel's headers, not from the code under test.
const EOPNOTSUPP = 95;

describe('the page cache of shared files', () => {
  it('does not tell a run whether another run read a file: RWF_NOWAIT is refused', async () => {
    const probing = createSandbox({ allowNetwork: false, timeoutMs: 30_000 });
    const other = createSandbox({ allowNetwork: false, timeoutMs: 30_000 });
    const watch = probing.spawn(python, ['-c', probe, shared]);
    let output = '';
    watch.stdout.on('data', (chunk: Buffer) => {
      output += chunk.toString();
    });
    await new Promise<void>((resolve) => watch.stdout.once('data', () => resolve()));
    const read = await other.run('/usr/bin/head', ['-c', '100', shared]);
    expect(read.success).toBe(true);
    watch.stdin.end();
    await watch.exited;
    expect(output).toBe(`refused ${EOPNOTSUPP}\nrefused ${EOPNOTSUPP}\n`);
    await probing.close();
    await other.close();
  }, 60_000);
});
