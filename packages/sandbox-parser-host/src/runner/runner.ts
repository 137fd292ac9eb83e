// The child side of the parser protocol: takes the nonce off stdin, imports the parser module,
// says it is ready, reads one request, calls one exported function and writes one framed
// response on fd 3, then exits. It runs under `node --permission` with the limits already in
// place; see docs/parser-protocol.md.
//
// Everything the runner needs after the parser module has loaded is captured first, so a parser
// that replaces globals (JSON, Buffer, fs, process.exit) cannot change how the response is framed.
// The per-call nonce lives only in an off-heap Buffer inside this module's closure: a parser can
// write to any open descriptor, but without the nonce it cannot produce a frame the host accepts,
// and a heap snapshot (`v8.getHeapSnapshot()`) does not contain ArrayBuffer contents.
import { readSync, writeSync } from 'node:fs';
import {
  lengthBytes,
  nonceBytes,
  type ParserRequest,
  type ParserResponse,
  protocolVersion,
  readyLength,
  responseFd,
  runnerExitCode,
} from '../protocol/wire.ts';

// Builtin ESM bindings follow `syncBuiltinESMExports()`, which a parser may call after patching
// `fs`: copy the functions into constants now.
const readFd = readSync;
const writeFd = writeSync;
const reflectApply = Reflect.apply;
const setBytes = Uint8Array.prototype.set;
const stringify = JSON.stringify;
const parseJson = JSON.parse;
const hasOwn = Object.hasOwn;
const byteLength = Buffer.byteLength;
const bufferFrom = Buffer.from;
const allocSlow = Buffer.allocUnsafeSlow;
// `process.exit` runs 'exit' listeners a parser may have added; `reallyExit` (what it calls
// after them) does not.
const reallyExit = (process as unknown as { reallyExit(code: number): void }).reallyExit.bind(
  process,
);
const onProcess = process.on.bind(process);
const errorMessageLimit = 16_384;

/** Sleeps 1 ms: a non-blocking descriptor (not what the host sets up) said EAGAIN. */
function pause(): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 1);
}

/** Reads exactly `length` bytes from stdin into a fresh off-heap buffer; blocks until they came. */
function readExactly(length: number): Buffer | undefined {
  const buffer = allocSlow(length);
  let filled = 0;
  while (filled < length) {
    let read: number;
    try {
      read = readFd(0, buffer, filled, length - filled, null);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EAGAIN') throw error;
      pause();
      continue;
    }
    if (read === 0) return undefined;
    filled += read;
  }
  return buffer;
}

function writeAll(bytes: Buffer): void {
  let written = 0;
  while (written < bytes.length) {
    try {
      written += writeFd(responseFd, bytes, written, bytes.length - written);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EAGAIN') throw error;
      pause();
    }
  }
}

function fail(message: string): never {
  process.stderr.write(`parser runner: ${message}\n`);
  reallyExit(runnerExitCode.badRequest);
  throw new Error('unreachable');
}

/** Takes the nonce off stdin into its own off-heap buffer; the host sends it at spawn. */
function readNonce(): Buffer {
  const received = readExactly(nonceBytes);
  if (received === undefined) fail('stdin closed before the nonce arrived');
  const nonce = allocSlow(nonceBytes);
  reflectApply(setBytes, nonce, [received, 0]);
  received.fill(0);
  return nonce;
}

function readRequest(): ParserRequest {
  const header = readExactly(lengthBytes);
  if (header === undefined) fail('stdin closed before a request arrived');
  const body = readExactly(header.readUInt32BE(0));
  if (body === undefined) fail('stdin closed in the middle of the request');
  const request = parseJson(body.toString('utf8')) as ParserRequest;
  if (typeof request !== 'object' || request === null || request.v !== protocolVersion) {
    fail(`unsupported request (expected protocol version ${protocolVersion})`);
  }
  if (typeof request.parser !== 'string') fail('request.parser must be a string');
  return request;
}

function describeThrown(thrown: unknown): string {
  let message: string;
  try {
    message = thrown instanceof Error ? String(thrown.message) : String(thrown);
  } catch {
    message = 'parser threw a value that cannot be described';
  }
  return message.length > errorMessageLimit ? `${message.slice(0, errorMessageLimit)}…` : message;
}

/** The nonce, the body's length (big-endian) and the body. */
function frameOf(nonce: Buffer, body: Buffer): Buffer {
  const frame = allocSlow(nonceBytes + lengthBytes + body.length);
  // Typed-array primitives and index writes only: Buffer methods may be patched by now, and a
  // patched `copy` would see the nonce.
  reflectApply(setBytes, frame, [nonce, 0]);
  frame[nonceBytes] = (body.length >>> 24) & 0xff;
  frame[nonceBytes + 1] = (body.length >>> 16) & 0xff;
  frame[nonceBytes + 2] = (body.length >>> 8) & 0xff;
  frame[nonceBytes + 3] = body.length & 0xff;
  reflectApply(setBytes, frame, [body, nonceBytes + lengthBytes]);
  return frame;
}

function respond(nonce: Buffer, responseJson: string, exitCode: number): never {
  writeAll(frameOf(nonce, bufferFrom(responseJson, 'utf8')));
  reallyExit(exitCode);
  throw new Error('unreachable');
}

function respondError(nonce: Buffer, response: ParserResponse & { ok: false }): never {
  return respond(nonce, stringify(response), runnerExitCode.error);
}

/** Serialises the parser's result under the output cap, or says why it cannot be sent. */
function encodeResult(nonce: Buffer, data: unknown, maxOutputBytes: number): never {
  let json: string | undefined;
  try {
    json = stringify(data);
  } catch (error) {
    respondError(nonce, {
      ok: false,
      kind: 'invalid-result',
      error: `parser result is not JSON: ${describeThrown(error)}`,
    });
  }
  // `undefined` (a parser without a return value) travels as null, like Python's None.
  const dataJson = json ?? 'null';
  const size = byteLength(dataJson, 'utf8');
  if (size > maxOutputBytes) {
    respondError(nonce, {
      ok: false,
      kind: 'result-too-large',
      error: `parser result is ${size} bytes, over maxOutputBytes (${maxOutputBytes})`,
    });
  }
  // Spliced rather than stringified twice: the result can be megabytes.
  return respond(nonce, `{"ok":true,"data":${dataJson}}`, runnerExitCode.ok);
}

/** Imports the parser module; a module that fails to load is reported once the request came. */
async function loadModule(
  moduleUrl: string,
): Promise<{ namespace: Record<string, unknown> } | { failed: string }> {
  try {
    return { namespace: (await import(moduleUrl)) as Record<string, unknown> };
  } catch (error) {
    return { failed: `cannot load parser module: ${describeThrown(error)}` };
  }
}

async function main(): Promise<void> {
  const moduleUrl = process.argv[2];
  if (moduleUrl === undefined) fail('usage: runner <parser module URL>');
  // The nonce is taken off stdin before the module loads: once parser code runs, whatever is
  // still in the pipe is readable by it, and the nonce must not be.
  const nonce = readNonce();
  // A warm spare loads the module while it waits, so the call does not pay for the import.
  const loaded = await loadModule(moduleUrl);
  writeAll(frameOf(nonce, allocSlow(readyLength)));
  const { parser, payload, kwargs, limits } = readRequest();
  if ('failed' in loaded) {
    respondError(nonce, { ok: false, kind: 'load-error', error: loaded.failed });
  }
  const { namespace } = loaded;
  // Only an own export that is a function: `__proto__`, `constructor` and inherited names miss.
  const fn = hasOwn(namespace, parser) ? namespace[parser] : undefined;
  if (typeof fn !== 'function') {
    respondError(nonce, { ok: false, kind: 'unknown-parser', error: `Unknown parser: ${parser}` });
  }
  // The loop runs dry when the parser awaits something that can never happen (a promise nobody
  // resolves): say so instead of exiting with no response.
  onProcess('beforeExit', () =>
    respondError(nonce, {
      ok: false,
      kind: 'never-settled',
      error: 'parser returned a promise that never settled',
    }),
  );
  let data: unknown;
  try {
    data = await fn(payload, kwargs ?? {});
  } catch (error) {
    respondError(nonce, { ok: false, kind: 'parser-error', error: describeThrown(error) });
  }
  encodeResult(nonce, data, limits.maxOutputBytes);
}

void main();
