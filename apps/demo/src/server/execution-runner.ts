// The one thing the HTTP layer needs from a sandbox: start an execution and get core's handle.
// `SandboxEngine` from @coda/sandbox-isolate fits it; so would any runner that speaks core's
// events, which keeps the server testable and the engine swappable.
import type { ExecutionContext, ExecutionHandle, ExecutionLimits } from '@coda/sandbox-core';

/** What the server submits. */
export interface ExecutionSubmission {
  code: string;
  /** Over the engine's defaults. */
  limits?: Partial<ExecutionLimits>;
  context: ExecutionContext;
}

/** Starts executions; the handle yields status events, then exactly one terminal event. */
export interface ExecutionRunner {
  submit(submission: ExecutionSubmission): ExecutionHandle;
  /**
   * TypeScript declarations of the `tools` object user code sees (`SandboxEngine` has it),
   * published on `GET /v1/tools`; a runner without tools may leave it out.
   */
  toolDeclarations?(): string;
}
