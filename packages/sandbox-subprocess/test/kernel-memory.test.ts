// Kernel memory a command makes the host hold counts against `maxMemoryMb`: pipe buffers and
// Unix socket buffers are charged to the memory cgroup (cgroup v1 counts kernel memory in the
// limit), and TCP/UDP buffers, which cgroup v1 counts apart, get a limit of their own (a quarter
// of maxMemoryMb). Each run has a control beside it without a memory limit, which shows the
// same program holding more than the limit in the host kernel.
import { describe, expect, it } from 'vitest';
import { createSandbox, SandboxControl } from '../src/index.ts';
import { python } from './support/helpers.ts';

const fixtures = `${import.meta.dirname}/fixtures`;
const limitMb = 64;
/**
 * For pipes and Unix sockets: below the 64 MiB of pipe buffers one user may hold by default
 * (fs.pipe-user-pages-soft), so that the unbounded control clearly passes it.
 */
const smallLimitMb = 32;

/** Runs a fixture that fills kernel buffers and prints how many MiB it queued. */
async function fill(script: string, count: number, maxMemoryMb: number) {
  const sandbox = createSandbox({ allowNetwork: true, maxMemoryMb, timeoutMs: 60_000 });
  return sandbox.run(python, [`${fixtures}/${script}`, String(count)], {
    readOnlyPaths: [`${fixtures}/${script}`],
  });
}

describe('kernel-held memory under maxMemoryMb (cgroup v1 on this host)', () => {
  it('TCP buffers: bounded by the run, not only by the host', async () => {
    const bounded = await fill('tcp-fill.py', 60, limitMb);
    expect(bounded.controls).toContain(SandboxControl.memorySocketBuffers);
    expect(bounded.success).toBe(true);
    // A quarter of the limit (16 MiB) plus what the kernel lets through at the edge.
    expect(Number(bounded.stdout)).toBeLessThanOrEqual(24);
    const unbounded = await fill('tcp-fill.py', 60, 0);
    expect(unbounded.controls).not.toContain(SandboxControl.memorySocketBuffers);
    expect(Number(unbounded.stdout)).toBeGreaterThan(limitMb * 2);
  });

  it('pipe buffers: charged to the limit, the run ends OOM', async () => {
    const bounded = await fill('pipe-fill.py', 400, smallLimitMb);
    expect(bounded).toMatchObject({ success: false, code: 'OOM', memoryExceeded: true });
    const unbounded = await fill('pipe-fill.py', 400, 0);
    expect(unbounded.success).toBe(true);
    expect(Number(unbounded.stdout)).toBeGreaterThan(smallLimitMb + 16);
  });

  it('Unix socket buffers: charged to the limit, the run ends OOM', async () => {
    const bounded = await fill('unix-fill.py', 480, smallLimitMb);
    expect(bounded).toMatchObject({ success: false, code: 'OOM', memoryExceeded: true });
    const unbounded = await fill('unix-fill.py', 480, 0);
    expect(unbounded.success).toBe(true);
    expect(Number(unbounded.stdout)).toBeGreaterThan(smallLimitMb + 16);
  });
});
