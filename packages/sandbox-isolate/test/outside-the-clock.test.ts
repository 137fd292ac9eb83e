// User code that runs where V8's timeout does not reach: isolated-vm copies an unhandled
// rejection's reason out of the isolate after the timed section, reading its `stack`, so an
// `Error.prepareStackTrace` that loops runs unbounded. On a worker's main thread (the synchronous
// start of an idle worker) nothing but the host can end it: the execution must still end with
// TIMEOUT within timeoutMs + 1 s (the host replaces that worker 250 ms past the limit; it holds
// no other execution). Real workers. What is left unbounded is in docs/security.md.
import { afterAll, describe, expect, it } from 'vitest';
import { SandboxEngine } from '../src/index.ts';
import { expectError, expectHealthy } from './helpers.ts';

describe('user code outside the clock', () => {
  const engine = new SandboxEngine({ dataHandler: () => 1 });
  afterAll(() => engine.dispose());

  it('ends a looping prepareStackTrace of an unhandled rejection within timeoutMs + 1 s', async () => {
    await engine.ready();
    const started = performance.now();
    const event = expectError(
      await engine.run({
        code: `Error.prepareStackTrace = () => { for (;;) {} };
          Promise.reject(new Error('x')); await dataProxy.request(1); return 1`,
        limits: { timeoutMs: 1_000 },
      }),
      'TIMEOUT',
    );
    expect(event.details).toEqual({ timeoutMs: 1_000 });
    expect(performance.now() - started).toBeLessThan(2_000);
    await expectHealthy(engine);
  });
});
