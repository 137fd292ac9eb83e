// The isolate engine as the demo (and the HTTP server) uses it: the sample data behind
// `dataProxy.request`, guards optional.
//
// TEMPORARY: @coda/sandbox-isolate has not exported SandboxEngine yet, so it is looked up at run
// time and the parts that need it report themselves as pending. Replaced by a static import when
// the package lands.
import type { ExecutionGuard, ExecutionHandle, JsonValue } from '@coda/sandbox-core';
import { answerDataRequest } from '../sample-data/data-request.ts';
import type { ExecutionRunner, ExecutionSubmission } from '../server/execution-runner.ts';

/** The engine the demo runs snippets on. */
export interface DemoEngine extends ExecutionRunner {
  submit(submission: ExecutionSubmission): ExecutionHandle;
  dispose(): Promise<void>;
}

interface EngineConstructor {
  new (config: {
    dataHandler?: (params: JsonValue) => unknown;
    guards?: readonly ExecutionGuard[];
    maxConcurrent?: number;
  }): DemoEngine;
}

/** Opens an engine answering data requests from the sample data; undefined while pending. */
export async function openDemoEngine(
  guards: readonly ExecutionGuard[] = [],
): Promise<DemoEngine | undefined> {
  const isolate = (await import('@coda/sandbox-isolate')) as { SandboxEngine?: EngineConstructor };
  if (isolate.SandboxEngine === undefined) return undefined;
  return new isolate.SandboxEngine({ dataHandler: answerDataRequest, guards });
}
