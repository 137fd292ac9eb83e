// The confinement each mode gives, and the degraded path (no bubblewrap) keeping every limit the
// host enforces itself: RLIMIT_CPU, the heap limit, the resident-memory watchdog, the channel.
import { describe, expect, it } from 'vitest';
import { makeHost } from './helpers.ts';

describe('confinement', () => {
  it('auto: reports what applied, and bubblewrap brings its namespaces and seccomp', async () => {
    const host = makeHost();
    const result = await host.runParser('echo', 1);
    expect(result.ok).toBe(true);
    const report = result.confinement;
    expect(report).toEqual(host.confinement);
    expect(report?.permissionModel).toBe(true);
    expect(report?.cpu).toBe('rlimit');
    if (report?.sandbox === 'bubblewrap') {
      expect(report.controls).toEqual(
        expect.arrayContaining(['bubblewrap', 'namespace:net', 'seccomp', 'no-file-writes']),
      );
      expect(report.degraded).toBeUndefined();
    } else {
      expect(report?.degraded).toEqual(expect.any(String));
    }
  });

  it('required: runs confined, or refuses with UNAVAILABLE where bubblewrap cannot run', async () => {
    const host = makeHost({ confinement: 'required' });
    const result = await host.runParser('echo', 1);
    if (result.ok) expect(result.confinement?.sandbox).toBe('bubblewrap');
    else expect(result).toMatchObject({ code: 'UNAVAILABLE', exitCode: null });
  });
});

describe('degraded (confinement: none)', () => {
  it('says it is degraded', async () => {
    const host = makeHost({ confinement: 'none' });
    const result = await host.runParser('echo', 1);
    expect(result.confinement).toMatchObject({
      sandbox: 'none',
      memory: 'rss-watchdog',
      cpu: 'rlimit',
      permissionModel: true,
      degraded: "confinement: 'none' was asked for",
    });
  });

  it('counts bytes queued on its sockets in the kernel, against an unbounded control', async () => {
    const host = makeHost({ confinement: 'none' });
    const mib = 1024 * 1024;
    const control = await host.runParser(
      'socketHoard',
      { connections: 80 },
      { memoryBytes: 2048 * mib },
    );
    // The control shows the hoard's kernel queues pass the limit below while its own memory
    // (the watchdog passed it at 2 GiB) stays far under it.
    expect(control.ok).toBe(true);
    expect(control.data as number).toBeGreaterThan(160 * mib);
    const bounded = await host.runParser(
      'socketHoard',
      { connections: 80 },
      { memoryBytes: 160 * mib },
    );
    expect(bounded).toMatchObject({ ok: false, code: 'OOM', signal: 'SIGKILL' });
  });

  it('keeps the CPU limit, the heap limit and the Buffer bound', async () => {
    const host = makeHost({ confinement: 'none', maxConcurrent: 3 });
    const [cpu, heap, buffers] = await Promise.all([
      host.runParser('spin', null, { cpuSecs: 1, timeout: 20_000 }),
      host.runParser('heapBomb', null, { memoryBytes: 128 * 1024 * 1024 }),
      host.runParser('bufferBomb', null, { memoryBytes: 160 * 1024 * 1024 }),
    ]);
    expect(cpu).toMatchObject({ code: 'TIMEOUT', error: 'CPU time limit exceeded (1 s)' });
    // The heap limit or the watchdog, whichever the heap bomb reaches first.
    expect(heap).toMatchObject({ code: 'OOM' });
    expect(heap.error).toMatch(/^memory limit exceeded: /);
    expect(buffers).toMatchObject({ code: 'OOM', signal: 'SIGKILL' });
    expect(buffers.error).toMatch(
      /^memory limit exceeded: \d+ bytes held \(resident, page tables, socket queues\), limit 167772160$/,
    );
  });

  it('keeps the permission model and the unforgeable channel', async () => {
    const host = makeHost({ confinement: 'none', maxConcurrent: 2 });
    const [write, forged] = await Promise.all([
      host.runParser('writeFile', null),
      host.runParser('forgeResponse', null),
    ]);
    expect(write.error).toMatch(/Access to this API has been restricted/);
    expect(forged).toMatchObject({ ok: true, data: 'genuine' });
  });
});
