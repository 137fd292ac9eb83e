// The isolate engine as the demo and the HTTP server use it: the sample data behind
// `dataProxy.request` and three named tools, and whatever guards the caller composes in.
import type { ExecutionGuard } from '@coda/sandbox-core';
import { SandboxEngine } from '@coda/sandbox-isolate';
import { answerDataRequest } from '../sample-data/data-request.ts';
import { orderTools } from '../sample-data/order-tools.ts';

/** Options of {@link createDemoEngine}. */
export interface DemoEngineOptions {
  /** Asked before every execution; the engine ends refused ones with the guard's code. */
  guards?: readonly ExecutionGuard[];
  /** Tier 5: executions running at once; more end with `CAPACITY`. Default the engine's (8). */
  maxConcurrent?: number;
}

/**
 * An engine whose `dataProxy.request(params)` reads the sample order book, and whose
 * `tools.getOrder`, `tools.revenueByRegion` and `tools.topCustomers` answer from it. Isolates run in
 * supervised worker processes (the engine's default), so even a V8 failure costs a worker, not
 * this process. Call `dispose()` on shutdown.
 */
export function createDemoEngine(options: DemoEngineOptions = {}): SandboxEngine {
  return new SandboxEngine({
    // Params arrive as JSON from untrusted code; answerDataRequest validates them with zod and
    // its throws reach user code as a rejected request, never the host.
    dataHandler: (params) => answerDataRequest(params),
    tools: orderTools,
    ...(options.guards === undefined ? {} : { guards: options.guards }),
    ...(options.maxConcurrent === undefined ? {} : { maxConcurrent: options.maxConcurrent }),
  });
}
