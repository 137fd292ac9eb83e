// createFetchTool: an HTTP(S) client user code calls as `await tools.fetch({ url })`, run on the
// host under an egress policy (core's NetworkRules): the name is resolved on the host, every
// address checked, the connection pinned to the checked address, every redirect hop checked
// again, and the response bounded in bytes and time.
import { request as httpRequest, type IncomingMessage, type RequestOptions } from 'node:http';
import { request as httpsRequest } from 'node:https';
import type { LookupFunction } from 'node:net';
import { createSecureContext, getCACertificates, type SecureContext } from 'node:tls';
import {
  admitDestination,
  hostLocalAddresses,
  type JsonValue,
  type NetworkDenialReason,
  type NetworkEvent,
  type NetworkPolicy,
  NetworkRules,
  systemLookup,
  validate,
} from '@coda/sandbox-core';
import { z } from 'zod';
import type { ToolDefinition } from './tool-config.ts';

/**
 * Resolves a host name to its addresses (default: `systemLookup` of `@coda/sandbox-core`, the
 * hosts file then DNS). `signal` aborts when the call times out or is cancelled; a resolver may
 * ignore it.
 */
export type FetchToolLookup = (
  hostname: string,
  signal?: AbortSignal,
) => Promise<readonly { readonly address: string; readonly family: number }[]>;

/** Options of {@link createFetchTool}. */
export interface FetchToolOptions {
  /** Most response body bytes read; a larger body fails the call. 1 to 67 108 864; default 1 MiB. */
  maxResponseBytes?: number | undefined;
  /** Milliseconds for the whole call, redirects included, 1 to 300 000; default 10 000. */
  timeoutMs?: number | undefined;
  /** Redirects followed (each hop checked against the policy), 0 to 20; default 5. */
  maxRedirects?: number | undefined;
  /** Resolves names on the host; default `systemLookup` (the hosts file, then DNS; cancelled at timeoutMs). */
  lookup?: FetchToolLookup | undefined;
  /** Extra trusted CA certificates (PEM) for HTTPS, besides Node's bundle. Default none. */
  ca?: string | string[] | undefined;
  /** Called for each connection allowed or refused, as it happens. */
  onEvent?: ((event: NetworkEvent) => void) | undefined;
}

const FetchToolOptionsSchema = z.strictObject({
  maxResponseBytes: z.number().int().min(1).max(67_108_864).optional(),
  timeoutMs: z.number().int().min(1).max(300_000).optional(),
  maxRedirects: z.number().int().min(0).max(20).optional(),
  lookup: z
    .custom<FetchToolLookup>((value) => typeof value === 'function', 'expected a function')
    .optional(),
  ca: z.union([z.string(), z.array(z.string())]).optional(),
  onEvent: z
    .custom<(event: NetworkEvent) => void>(
      (value) => typeof value === 'function',
      'expected a function',
    )
    .optional(),
});

/** What user code passes to the tool. */
const FetchInputSchema = z.strictObject({
  url: z.string().max(8192),
  method: z.enum(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE']).default('GET'),
  headers: z
    .record(
      z.string().regex(/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/, 'expected a header name'),
      z.string().max(8192),
    )
    .optional(),
  /** A string goes as is; any other JSON value as JSON (content-type application/json). */
  body: z.json().optional(),
  responseType: z.enum(['text', 'json']).default('text'),
});

/** The tool's answer. */
export interface FetchToolResponse {
  /** The HTTP status of the last hop. */
  status: number;
  /** Its reason phrase (empty over HTTP/2-style servers that send none). */
  statusText: string;
  /** The URL of the last hop (after redirects). */
  url: string;
  /** Response headers, lowercase names, repeated ones joined with ", ". */
  headers: Record<string, string>;
  /** The body as text, or parsed when `responseType: 'json'`. */
  body: JsonValue;
}

/** Headers user code may not set: the tool owns framing and the hop. */
const ownedHeaders = new Set([
  'host',
  'content-length',
  'transfer-encoding',
  'connection',
  'proxy-authorization',
  'te',
  'upgrade',
]);
/** Headers dropped when a redirect leaves the origin. */
const credentialHeaders = new Set(['authorization', 'cookie', 'proxy-authorization']);

/** A refusal as user code reads it (the call rejects with this message). */
class EgressRefusal extends Error {
  override name = 'EgressRefusal';
}

/**
 * A named tool (`tools: { fetch: createFetchTool(policy) }`, listed by `toolDeclarations()`)
 * that fetches a URL on the host under `policy`: the same allow/deny patterns and resolution
 * check (every address, every hop) as the subprocess egress proxy. The policy's
 * `maxEgressBytes` holds per execution and counts request bodies sent and response bodies read,
 * not headers or URLs (the bridge limits bound those); a redirect's own body is never read. A
 * refused destination, a body over `maxResponseBytes`, the egress cap or a timeout (name lookup
 * included) rejects the call with a message saying why
 * (`egress refused other.test:443: not-allowed (...)`). The request body counts
 * against the bridge limits (`maxRequestBytes`, `maxDataBytes`) like any tool input.
 */
export function createFetchTool(
  policy: NetworkPolicy,
  options: FetchToolOptions = {},
): ToolDefinition<z.output<typeof FetchInputSchema>> {
  const rules = new NetworkRules(policy);
  const settings = validate(FetchToolOptionsSchema, options, 'fetch tool options');
  const maxBytes = settings.maxResponseBytes ?? 1_048_576;
  const timeoutMs = settings.timeoutMs ?? 10_000;
  const maxRedirects = settings.maxRedirects ?? 5;
  const resolve: FetchToolLookup = settings.lookup ?? systemLookup;
  const emit = (event: NetworkEvent): void => {
    try {
      settings.onEvent?.(event);
    } catch {
      // A listener's failure is not the call's.
    }
  };
  const refuse = (
    host: string,
    port: number,
    reason: NetworkDenialReason,
    detail: string,
  ): never => {
    emit({ type: 'denied', host, port, reason, detail });
    throw new EgressRefusal(`egress refused ${host}:${port}: ${reason} (${detail})`);
  };

  /** The URL user code (or a redirect) named, or its refusal, reported like any other. */
  const checkedUrl = (text: string): URL => {
    const parsed = parseUrl(text);
    if (parsed instanceof URL) return parsed;
    const readable = URL.parse(text);
    const web = readable?.protocol === 'http:' || readable?.protocol === 'https:';
    const host = readable !== null && readable.hostname !== '' ? readable.hostname : text;
    const port = readable === null ? 0 : web ? portOf(readable) : Number(readable.port);
    return refuse(host.slice(0, 200), port, 'protocol', parsed.refused);
  };

  // Node's `ca` replaces its trust store: the default one and the caller's, built once (about
  // 11 ms of CPU per build).
  const trust =
    settings.ca === undefined
      ? undefined
      : createSecureContext({ ca: [...getCACertificates('default'), ...[settings.ca].flat()] });

  const cap = policy.maxEgressBytes;
  // Bytes each execution moved (request bodies sent, response bodies read), against
  // maxEgressBytes. Keyed by the execution's signal: one per execution, collected with it.
  const movedBy = new WeakMap<AbortSignal, { bytes: number }>();

  /** Checks one hop; returns the address to connect to. */
  const admit = async (
    url: URL,
    signal: AbortSignal,
  ): Promise<{ host: string; address: string; family: 4 | 6 }> => {
    const port = portOf(url);
    const hostname = url.hostname.replace(/^\[|\]$/g, '');
    const admission = await beforeAbort(
      admitDestination(
        rules,
        hostname,
        port,
        (name) => resolve(name, signal),
        hostLocalAddresses(),
      ),
      signal,
      `the request to ${url.host}`,
    );
    if (!admission.ok) return refuse(admission.host, port, admission.reason, admission.detail);
    emit({ type: 'allowed', host: admission.host, port, address: admission.address });
    return admission;
  };

  return {
    description:
      'Fetches an http(s) URL from the host, limited to the hosts the egress policy allows. Returns status, headers and the body (text, or parsed JSON with responseType "json"). A refused host rejects with the reason.',
    input: FetchInputSchema,
    handler: async (input, info) => {
      const signal = AbortSignal.any([info.signal, AbortSignal.timeout(timeoutMs)]);
      const execution = movedBy.get(info.signal) ?? { bytes: 0 };
      movedBy.set(info.signal, execution);
      const capReached = (url: URL): never =>
        refuse(url.hostname, portOf(url), 'egress-limit', `maxEgressBytes (${cap}) reached`);
      /** Counts `bytes` moved to or from `url`; past maxEgressBytes, refuses (egress-limit). */
      const count = (url: URL, bytes: number): void => {
        if (cap === undefined) return;
        execution.bytes += bytes;
        if (execution.bytes > cap) capReached(url);
      };
      let url = checkedUrl(input.url);
      let method: string = input.method;
      let body: string | undefined =
        input.body === undefined
          ? undefined
          : typeof input.body === 'string'
            ? input.body
            : JSON.stringify(input.body);
      const headers: Record<string, string> = {};
      for (const [name, value] of Object.entries(input.headers ?? {})) {
        if (!ownedHeaders.has(name.toLowerCase())) headers[name.toLowerCase()] = value;
      }
      if (body !== undefined && typeof input.body !== 'string')
        headers['content-type'] ??= 'application/json';
      for (let hop = 0; ; hop += 1) {
        // No new connection once the cap is reached; a request body counts as it is sent.
        if (cap !== undefined && execution.bytes >= cap) capReached(url);
        const pinned = await admit(url, signal);
        if (body !== undefined) count(url, Buffer.byteLength(body));
        const response = await send(url, method, headers, body, pinned, signal, trust).catch(
          (error: unknown) => {
            // A connection that failed after it was allowed is reported, as the proxy does (a
            // timeout too; not the execution's own end).
            if (!info.signal.aborted) {
              emit({
                type: 'denied',
                host: pinned.host,
                port: portOf(url),
                reason: 'unreachable',
                detail: (error as Error).message,
              });
            }
            throw error;
          },
        );
        const location = response.headers.location;
        if (
          response.statusCode !== undefined &&
          [301, 302, 303, 307, 308].includes(response.statusCode) &&
          location !== undefined
        ) {
          // Nothing of a redirect's body is read: draining it would read without a bound
          // until timeoutMs (the connection is never reused: agent false).
          response.destroy();
          const next = checkedUrl(URL.parse(location, url.href)?.href ?? location);
          if (hop >= maxRedirects) {
            refuse(next.hostname, portOf(next), 'protocol', `more than ${maxRedirects} redirects`);
          }
          if (next.origin !== url.origin)
            for (const name of credentialHeaders) delete headers[name];
          if (
            response.statusCode === 303 ||
            ((response.statusCode === 301 || response.statusCode === 302) && method === 'POST')
          ) {
            method = 'GET';
            body = undefined;
            delete headers['content-type'];
          }
          url = next;
          continue;
        }
        const text = await readBody(response, maxBytes, signal, (bytes) => count(url, bytes));
        let parsedBody: JsonValue = text;
        if (input.responseType === 'json') {
          try {
            parsedBody = JSON.parse(text) as JsonValue;
          } catch {
            throw new EgressRefusal(`the response of ${url.href} is not JSON`);
          }
        }
        const outHeaders: Record<string, string> = {};
        for (const [name, value] of Object.entries(response.headers)) {
          if (value !== undefined)
            outHeaders[name] = Array.isArray(value) ? value.join(', ') : value;
        }
        return {
          status: response.statusCode ?? 0,
          statusText: response.statusMessage ?? '',
          url: url.href,
          headers: outHeaders,
          body: parsedBody,
        } satisfies FetchToolResponse;
      }
    },
  };
}

/** The port a URL reaches (its scheme's default when it names none). */
function portOf(url: URL): number {
  return url.port === '' ? (url.protocol === 'https:' ? 443 : 80) : Number(url.port);
}

/**
 * `promise`, or a refusal naming `what` when `signal` aborts first: a resolver that ignores the
 * signal is kept inside the call's timeoutMs all the same.
 */
function beforeAbort<T>(promise: Promise<T>, signal: AbortSignal, what: string): Promise<T> {
  const refusal = () => new EgressRefusal(`${what} timed out or was cancelled`);
  if (signal.aborted) return Promise.reject(refusal());
  return new Promise((resolve, reject) => {
    const onAbort = () => reject(refusal());
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(error);
      },
    );
  });
}

/** `text` as a URL the tool may fetch, or why not. */
function parseUrl(text: string): URL | { refused: string } {
  const url = URL.parse(text);
  if (url === null) return { refused: `not a URL: ${JSON.stringify(text.slice(0, 200))}` };
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    return { refused: `only http and https URLs (got ${url.protocol})` };
  if (url.username !== '' || url.password !== '')
    return { refused: 'no credentials in the URL; send an authorization header' };
  // Node's http reads port 0 as "the scheme's default", so the policy would check one port and
  // the request reach another.
  if (url.port === '0') return { refused: `port 0 names no server (${url.host})` };
  return url;
}

/** One request on a connection pinned to the checked address (TLS still verifies the name). */
function send(
  url: URL,
  method: string,
  headers: Record<string, string>,
  body: string | undefined,
  pinned: { address: string; family: 4 | 6 },
  signal: AbortSignal,
  trust: SecureContext | undefined,
): Promise<IncomingMessage> {
  // The connection goes to the address admit() checked, whatever a second resolution would say.
  const lookup: LookupFunction = (_hostname, options, callback) => {
    if (options.all === true) callback(null, [{ address: pinned.address, family: pinned.family }]);
    else callback(null, pinned.address, pinned.family);
  };
  const options: RequestOptions & { secureContext?: SecureContext } = {
    method,
    hostname: url.hostname.replace(/^\[|\]$/g, ''),
    port: portOf(url), // the port admit() checked, never left for Node to default
    path: `${url.pathname}${url.search}`,
    headers: {
      ...headers,
      host: url.host,
      ...(body === undefined ? {} : { 'content-length': String(Buffer.byteLength(body)) }),
    },
    lookup,
    signal,
    agent: false,
    ...(trust === undefined ? {} : { secureContext: trust }),
  };
  return new Promise((resolve, reject) => {
    const request = (url.protocol === 'https:' ? httpsRequest : httpRequest)(options, resolve);
    request.once('error', (error) =>
      reject(
        signal.aborted
          ? new EgressRefusal(`the request to ${url.host} timed out or was cancelled`)
          : new EgressRefusal(`${url.host}: ${error.message}`),
      ),
    );
    // A 101 (Switching Protocols) answer is never a response: Node hands the socket to an
    // 'upgrade' listener or, with none, closes it without an error, which would leave the
    // call waiting past timeoutMs. Both end the call here (a settled promise ignores the rest).
    request.once('upgrade', (_response, socket) => {
      socket.destroy();
      reject(new EgressRefusal(`${url.host} switched protocols (101); only HTTP answers are read`));
    });
    request.once('close', () =>
      reject(new EgressRefusal(`${url.host} closed the connection without an answer`)),
    );
    request.end(body);
  });
}

/**
 * The body as UTF-8, refused past `maxBytes`. `count` sees each chunk as it arrives and may throw
 * (the egress cap): the response is then cut and the call rejects with that error.
 */
function readBody(
  response: IncomingMessage,
  maxBytes: number,
  signal: AbortSignal,
  count: (bytes: number) => void,
): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    response.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > maxBytes) {
        response.destroy();
        reject(new EgressRefusal(`the response is larger than maxResponseBytes (${maxBytes})`));
        return;
      }
      try {
        count(chunk.length);
      } catch (error) {
        response.destroy();
        reject(error);
        return;
      }
      chunks.push(chunk);
    });
    response.once('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    response.once('error', () =>
      reject(
        new EgressRefusal(
          signal.aborted ? 'the request timed out or was cancelled' : 'the response was cut',
        ),
      ),
    );
  });
}
