// How the proxy resolves names: on the host, with a resolver the caller may replace (tests use
// one they control), bounded in time.
import { lookup } from 'node:dns/promises';

/** Resolves a host name to its addresses; the default is the system resolver (`getaddrinfo`). */
export type EgressLookup = (
  hostname: string,
) => Promise<readonly { readonly address: string; readonly family: number }[]>;

/** The system resolver, every address in the order it gives them. */
export const systemLookup: EgressLookup = (hostname) =>
  lookup(hostname, { all: true, order: 'verbatim' });

const lookupTimeoutMs = 10_000;

/** `lookup(hostname)`, refused after 10 s. */
export async function lookupWithTimeout(
  resolve: EgressLookup,
  hostname: string,
): Promise<readonly { readonly address: string; readonly family: number }[]> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new Error(`no answer in ${lookupTimeoutMs} ms`)),
      lookupTimeoutMs,
    );
  });
  try {
    return await Promise.race([resolve(hostname), timeout]);
  } finally {
    clearTimeout(timer);
  }
}
