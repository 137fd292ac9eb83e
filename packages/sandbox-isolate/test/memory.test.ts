// memoryMb bounds every form of memory user code can make a process commit. What V8 counts ends
// in OOM inside the isolate; what it cannot stop kills one worker process, never the host.
import { readFileSync } from 'node:fs';
import { afterAll, describe, expect, it } from 'vitest';
import { SandboxEngine } from '../src/index.ts';
import { expectError, expectHealthy } from './helpers.ts';

const engine = new SandboxEngine({ limits: { memoryMb: 32, timeoutMs: 2_000 } });
const hostRssBefore = process.memoryUsage.rss();
afterAll(() => engine.dispose());

function rssMb(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(/^VmRSS:\s+(\d+)/m.exec(status)?.[1]) / 1024;
}

describe('memory bounds', () => {
  it.each([
    [
      'ArrayBuffers',
      'const a = []; for (let i = 0; i < 40; i++) { const b = new ArrayBuffer(16e6); new Uint8Array(b).fill(1); a.push(b); } return a.length',
    ],
    ['a 800 MB typed array', 'return new Float64Array(1e8).length'],
    ['heap objects', 'const m = new Map(); let i = 0; while (true) m.set(i++, { i });'],
    ['nested arrays', 'const a = []; while (true) a.push(new Array(1e6).fill(1));'],
  ])('%s end with OOM', async (_name, code) => {
    const error = expectError(await engine.run({ code }), 'OOM');
    expect(error.details).toMatchObject({ memoryMb: 32 });
    await expectHealthy(engine);
  });

  it('resizable buffers cannot be made, nor buffers grown, past what isolated-vm counts', async () => {
    // A resizable buffer's pages, its initial length included, are committed outside
    // isolated-vm's allocator: a 32 MiB run held 256 MiB of them (a helper's attack).
    const resizable = expectError(
      await engine.run({
        code: 'const b = new ArrayBuffer(64 * 2 ** 20, { maxByteLength: 64 * 2 ** 20 }); new Uint8Array(b).fill(1); return b.byteLength',
        limits: { memoryMb: 32 },
      }),
      'RUNTIME',
    );
    expect(resizable.message).toBe(
      'TypeError: resizable ArrayBuffers are not available in the sandbox (their memory is outside memoryMb)',
    );
    const transfer = expectError(
      await engine.run({ code: 'const b = new ArrayBuffer(8); return b.transfer(6e8).byteLength' }),
      'RUNTIME',
    );
    expect(transfer.message).toBe('TypeError: b.transfer is not a function');
  });

  it('shared and WebAssembly memories are not available', async () => {
    for (const code of [
      'return new SharedArrayBuffer(6e8).byteLength',
      'return new WebAssembly.Memory({ initial: 1, maximum: 20000 }).buffer.byteLength',
    ]) {
      expect(expectError(await engine.run({ code }), 'RUNTIME').message).toMatch(
        /^ReferenceError: (SharedArrayBuffer|WebAssembly) is not defined$/,
      );
    }
  });

  it('a V8 fatal error (an oversized array) kills only the worker: CRASH', async () => {
    // A loose worker bound, so V8's own abort comes before the supervisor's memory kill.
    const loose = new SandboxEngine({ workers: 1, poolSize: 0, workerBaseMemoryMb: 2_048 });
    try {
      const error = expectError(
        await loose.run({ code: "return 'x'.repeat(2 ** 28).split('').length" }),
        'CRASH',
      );
      expect(error.message).toContain('Fatal JavaScript invalid size error');
      expect(error.message).not.toMatch(/\/root|node_modules/);
      await loose.ready();
      await expectHealthy(loose);
    } finally {
      await loose.dispose();
    }
  });

  it('leaves the host and the workers within bounds', async () => {
    await engine.ready();
    const hostGrowthMb = (process.memoryUsage.rss() - hostRssBefore) / 1_048_576;
    const workers = engine.stats().workerPids.map(rssMb);
    console.info(
      `memory bounds: host RSS grew ${hostGrowthMb.toFixed(1)} MiB; worker RSS ${workers.map((mb) => mb.toFixed(0)).join(', ')} MiB`,
    );
    expect(hostGrowthMb).toBeLessThan(64);
    for (const mb of workers) expect(mb).toBeLessThan(256 + 3 * 32);
  });
});
