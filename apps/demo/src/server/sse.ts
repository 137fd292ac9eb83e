// Server-Sent Events for one execution: each core event becomes `event: <type>` with its JSON
// as `data`, so a browser's parser (or `curl -N`) sees status lines, then the terminal event.
import type { ServerResponse } from 'node:http';
import type { SandboxEvent } from '@coda/sandbox-core';

/** Sends the SSE response headers at once, so the client knows the execution was admitted. */
export function openEventStream(response: ServerResponse, executionId: string): void {
  response.writeHead(200, {
    'content-type': 'text/event-stream; charset=utf-8',
    'cache-control': 'no-store',
    // Proxies such as nginx buffer responses unless told not to; events must arrive live.
    'x-accel-buffering': 'no',
    'x-execution-id': executionId,
  });
  response.flushHeaders();
}

/** Writes one event. JSON never contains a raw newline, so one `data:` line always suffices. */
export function writeEvent(response: ServerResponse, event: SandboxEvent): void {
  response.write(`event: ${event.type}\ndata: ${JSON.stringify(event)}\n\n`);
}

/** Writes an SSE comment, which clients ignore: traffic on an otherwise idle stream. */
export function writeKeepAlive(response: ServerResponse): void {
  if (!response.destroyed) response.write(': keep-alive\n\n');
}
