// Nothing of an execution starts after its end is decided: 1 000 trials each of a cancellation, a
// timeout and a passed limit, in both modes, with code that calls a side-effecting tool as fast as
// it can; not one tool handler may start after the terminal event, and every handler still
// running when it goes out must already see its signal aborted. Real isolates, real workers.
import type { TerminalEvent } from '@coda/sandbox-core';
import { afterAll, describe, expect, it } from 'vitest';
import { SandboxEngine } from '../src/index.ts';

const trials = 1_000;
/** Executions in flight at once: enough to keep both cores and both workers busy. */
const parallel = 8;

/** A tool loop in every shape a model writes one: awaited, un-awaited, and both at once. */
const toolLoop = `for (;;) { tools.act({}).catch(() => {}); await tools.act({}); }`;

interface Ledger {
  ended: Set<string>;
  running: Map<string, Set<AbortSignal>>;
  startsAfterEnd: number;
  notAbortedAtEnd: number;
  starts: number;
  /** Cancels execution id once its handler has started this many times. */
  cancelAt: Map<string, { starts: number; cancel: () => void }>;
}

function engineFor(isolation: 'process' | 'in-process', ledger: Ledger) {
  return new SandboxEngine({
    isolation,
    maxConcurrent: 64,
    tools: {
      act: {
        description: 'A side effect (a payment, an email).',
        handler: async (_input, { context, signal }) => {
          const id = context.executionId;
          ledger.starts++;
          if (ledger.ended.has(id)) ledger.startsAfterEnd++;
          const running = ledger.running.get(id) ?? new Set<AbortSignal>();
          ledger.running.set(id, running);
          running.add(signal);
          // A cancellation while calls are in flight: at a handler start, now or a turn later.
          const cancel = ledger.cancelAt.get(id);
          if (cancel !== undefined && --cancel.starts === 0) {
            if (ledger.starts % 2 === 0) cancel.cancel();
            else setImmediate(cancel.cancel);
          }
          try {
            await new Promise((resolve) => setTimeout(resolve, 1));
          } finally {
            running.delete(signal);
          }
          return null;
        },
      },
    },
  });
}

/** Records the end of `id` as the caller sees it, and checks the handlers still running then. */
function recordEnd(ledger: Ledger, id: string): void {
  ledger.ended.add(id);
  for (const signal of ledger.running.get(id) ?? []) if (!signal.aborted) ledger.notAbortedAtEnd++;
}

type Trial = 'cancel' | 'timeout' | 'limit';
const expected: Record<Trial, string> = {
  cancel: 'CANCELLED',
  timeout: 'TIMEOUT',
  limit: 'LIMIT_EXCEEDED',
};

async function runTrial(engine: SandboxEngine, ledger: Ledger, trial: Trial, n: number) {
  const executionId = `${trial}-${n}`;
  // A cancelled execution keeps its slot until its isolate has stopped (docs/isolate.md): wait
  // for one rather than be refused for capacity.
  while (engine.stats().active >= parallel) await new Promise((resolve) => setTimeout(resolve, 1));
  const limits =
    trial === 'timeout'
      ? { timeoutMs: 15, maxDataRequests: 1_000_000 }
      : trial === 'limit'
        ? { maxDataRequests: 1 + (n % 7) }
        : { maxDataRequests: 1_000_000 };
  const handle = engine.submit({ code: toolLoop, limits, context: { executionId } });
  if (trial === 'cancel') {
    ledger.cancelAt.set(executionId, { starts: 1 + (n % 5), cancel: () => handle.cancel() });
  }
  const event: TerminalEvent = await handle.result;
  recordEnd(ledger, executionId);
  return event.type === 'error' ? event.code : 'result';
}

describe.each(['process', 'in-process'] as const)(
  'nothing starts after the end (%s)',
  (isolation) => {
    const ledger: Ledger = {
      ended: new Set(),
      running: new Map(),
      startsAfterEnd: 0,
      notAbortedAtEnd: 0,
      starts: 0,
      cancelAt: new Map(),
    };
    const engine = engineFor(isolation, ledger);
    afterAll(() => engine.dispose());

    it.each(['cancel', 'timeout', 'limit'] as const)(
      `${trials} trials of %s: 0 handler starts after the terminal event`,
      async (trial) => {
        await engine.ready();
        const codes = new Map<string, number>();
        let next = 0;
        const startsBefore = ledger.starts;
        await Promise.all(
          Array.from({ length: parallel }, async () => {
            while (next < trials) {
              const code = await runTrial(engine, ledger, trial, next++);
              codes.set(code, (codes.get(code) ?? 0) + 1);
            }
          }),
        );
        // Give late dispatches every chance to show up: the workers' queues drain meanwhile.
        await new Promise((resolve) => setTimeout(resolve, 200));
        expect(Object.fromEntries(codes)).toEqual({ [expected[trial]]: trials });
        // The tool really ran: the trials measured something.
        expect(ledger.starts - startsBefore).toBeGreaterThan(trials);
        expect(ledger.startsAfterEnd).toBe(0);
        expect(ledger.notAbortedAtEnd).toBe(0);
      },
      120_000,
    );
  },
);
