// The Hono environment of the demo server: what middleware stores on the context for the
// handlers and the log after it.
import type { SandboxErrorCode } from '@coda/sandbox-core';
import type { HttpBindings } from '@hono/node-server';

/** Variables and bindings every request of the demo server carries. */
export interface DemoEnv {
  Bindings: HttpBindings;
  Variables: {
    /** Assigned on arrival at /v1/executions, so a refusal is logged with the id it would have run under. */
    executionId: string;
    /** The caller's `x-user-id`, once validated. */
    userId: string;
    /** The code of the error response, when the request was refused; for the log. */
    refusal: SandboxErrorCode;
  };
}
