// An execution's terminal event goes out after its guard leases are released (so that a caller
// who submits again at once is not refused), and releasing one can take a round trip (a Redis
// guard). Found here: a cancel arriving in that window, after user code had returned and its
// tool had run, replaced the result with CANCELLED, and the metrics counted a cancelled run. The
// execution had already ended: `cancel()` ends one "unless it already ended" (core's
// ExecutionHandle), so the caller gets what happened.
import type { ExecutionGuard, ExecutionHandle, TerminalEvent } from '@coda/sandbox-core';
import { describe, expect, it } from 'vitest';
import { SandboxEngine } from '../src/index.ts';
import { collect } from './helpers.ts';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** What the caller must get: the code returned after its tool ran once. */
const expected = { events: ['result'], payload: 'paid', payments: 1 };

describe.each(['in-process', 'process'] as const)(
  'a cancel while leases are released (%s)',
  (isolation) => {
    it('leaves the result of code that had already returned', async () => {
      let handle: ExecutionHandle | undefined;
      let payments = 0;
      // A lease whose release takes a round trip; the caller cancels while it is under way.
      const guard: ExecutionGuard = {
        name: 'slow-release',
        acquire: async () => ({
          release: async () => {
            handle?.cancel('caller gave up');
            await sleep(50);
          },
        }),
      };
      const engine = new SandboxEngine({
        isolation,
        workers: 1,
        poolSize: 1,
        guards: [guard],
        tools: {
          pay: {
            handler: () => {
              payments++;
              return 'paid';
            },
          },
        },
      });
      try {
        handle = engine.submit({ code: 'return await tools.pay()' });
        const events = await collect(handle);
        const terminal = events.at(-1) as TerminalEvent;
        expect({
          events: events.map((event) => event.type),
          payload:
            terminal.type === 'result' ? terminal.payload : `${terminal.code}: ${terminal.message}`,
          payments,
        }).toEqual(expected);
      } finally {
        await engine.dispose();
      }
    }, 30_000);
  },
);
