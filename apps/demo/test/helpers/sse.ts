// Reads Server-Sent Events from a fetch response body, as the playground page does.
import type { SandboxEvent } from '@coda/sandbox-core';

/** Yields each event's parsed `data` as it completes. */
export async function* readSse(body: ReadableStream<Uint8Array>): AsyncGenerator<SandboxEvent> {
  const decoder = new TextDecoder();
  let buffer = '';
  for await (const chunk of body) {
    buffer += decoder.decode(chunk, { stream: true });
    let end = buffer.indexOf('\n\n');
    while (end !== -1) {
      const data = buffer
        .slice(0, end)
        .split('\n')
        .filter((line) => line.startsWith('data:'))
        .map((line) => line.slice(5).trimStart())
        .join('\n');
      buffer = buffer.slice(end + 2);
      if (data !== '') yield JSON.parse(data) as SandboxEvent;
      end = buffer.indexOf('\n\n');
    }
  }
}

/** Polls `check` every 50 ms until it returns true or `timeoutMs` passes. */
export async function waitFor(check: () => boolean | Promise<boolean>, timeoutMs = 10_000) {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`condition not met within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}
