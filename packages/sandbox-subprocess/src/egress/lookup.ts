// How the proxy resolves names: on the host, with a resolver the caller may replace (tests use
// one they control), bounded in time.
import { systemLookup as coreSystemLookup } from '@coda/sandbox-core';

/**
 * Resolves a host name to its addresses; the default is the system resolver (the hosts file, then
 * DNS: see `systemLookup` in `@coda/sandbox-core`). `signal` aborts when the answer is no longer
 * wanted; a resolver may ignore it.
 */
export type EgressLookup = (
  hostname: string,
  signal?: AbortSignal,
) => Promise<readonly { readonly address: string; readonly family: number }[]>;

/** The system resolver: the hosts file, then DNS on the event loop, cancelled with the signal. */
export const systemLookup: EgressLookup = coreSystemLookup;

const lookupTimeoutMs = 10_000;

/** `resolve(hostname)`, refused (and its lookup aborted) after 10 s. */
export async function lookupWithTimeout(
  resolve: EgressLookup,
  hostname: string,
): Promise<readonly { readonly address: string; readonly family: number }[]> {
  const abort = new AbortController();
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      abort.abort();
      reject(new Error(`no answer in ${lookupTimeoutMs} ms`));
    }, lookupTimeoutMs);
  });
  try {
    return await Promise.race([resolve(hostname, abort.signal), timeout]);
  } finally {
    clearTimeout(timer);
  }
}
