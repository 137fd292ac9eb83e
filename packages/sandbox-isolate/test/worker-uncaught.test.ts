// A worker whose main thread throws while an isolate thread waits on it in a synchronous call
// (a console call) must still end. Node ends a process on an uncaught exception through its exit
// handlers, and isolated-vm's handler joins the isolate thread, which waits for the main thread:
// the worker hung for good (seen in CI: a host that died while user code flooded console calls,
// whose next status line failed with EPIPE). Driven here through the worker's own IPC protocol:
// an abort message whose error is not an object throws in the worker's message handler.
import { defaultExecutionLimits } from '@coda/sandbox-core';
import { describe, expect, it } from 'vitest';
import type { HostMessage, WorkerMessage } from '../src/worker/protocol.ts';
import { catastrophicMarker } from '../src/worker/protocol.ts';
import { forkWorker } from '../src/worker/worker-spawn.ts';

describe('a worker process', () => {
  it('ends at once on an uncaught exception while an isolate thread is in a console call', async () => {
    const worker = forkWorker();
    let stderr = '';
    worker.stderr?.on('data', (chunk: Buffer) => {
      stderr += chunk.toString('utf8');
    });
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
      worker.once('exit', (code, signal) => resolve({ code, signal })),
    );
    const messages: WorkerMessage[] = [];
    worker.on('message', (message: WorkerMessage) => messages.push(message));
    const send = (message: HostMessage) => worker.send(message);
    send({
      t: 'init',
      init: {
        maxConcurrent: 2,
        poolSize: 1,
        poolMemoryMb: defaultExecutionLimits.memoryMb,
        wasmModules: [],
        toolNames: [],
        defaultLimits: {
          ...defaultExecutionLimits,
          maxConsoleCalls: 10_000_000,
          maxStatusEvents: 10_000_000,
          timeoutMs: 30_000,
        },
      },
    });
    while (!messages.some((message) => message.t === 'ready')) {
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    send({ t: 'run', id: 'flood', code: 'for (let i = 0; ; i++) console.log(i)' });
    // The flood is under way once its console lines arrive.
    while (!messages.some((message) => message.t === 'status')) {
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    const thrownAt = Date.now();
    // Not an error object: rebuilding it throws in the worker's message handler.
    send({ t: 'abort', id: 'flood', error: null as never });
    // Far below the flood's own 30 s limit: a worker that ends does so at once.
    const hung = new Promise<'hung'>((resolve) => setTimeout(() => resolve('hung'), 10_000));
    const ended = await Promise.race([exited, hung]);
    worker.kill('SIGKILL');
    expect(ended).toEqual({ code: null, signal: 'SIGKILL' });
    expect(Date.now() - thrownAt).toBeLessThan(5_000);
    expect(stderr).toContain(`${catastrophicMarker}uncaught exception in the worker: TypeError`);
  }, 30_000);
});
