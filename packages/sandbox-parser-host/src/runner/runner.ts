// The child side of the parser protocol: reads one request from stdin, imports the parser module,
// calls one exported function and writes one framed response on fd 3, then exits. It runs under
// `node --permission` with the limits already in place; see docs/parser-protocol.md.
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
  readyByte,
  responseFd,
  runnerExitCode,
} from '../protocol/wire.ts';

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

/** Reads exactly `length` bytes from stdin into a fresh off-heap buffer; blocks until they came. */
function readExactly(length: number): Buffer | undefined {
  const buffer = allocSlow(length);
  let filled = 0;
  while (filled < length) {
    let read: number;
    try {
      read = readSync(0, buffer, filled, length - filled, null);
    } catch (error) {
      // A non-blocking stdin (not what the host sets up, but possible) reports EAGAIN: wait a bit.
      if ((error as NodeJS.ErrnoException).code === 'EAGAIN') {
        Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 1);
        continue;
      }
      throw error;
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
      written += writeSync(responseFd, bytes, written, bytes.length - written);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EAGAIN') throw error;
    }
  }
}

function fail(message: string): never {
  process.stderr.write(`parser runner: ${message}\n`);
  reallyExit(runnerExitCode.badRequest);
  throw new Error('unreachable');
}

function readRequest(): { nonce: Buffer; request: ParserRequest } {
  const header = readExactly(nonceBytes + lengthBytes);
  if (header === undefined) fail('stdin closed before a request arrived');
  const nonce = allocSlow(nonceBytes);
  header.copy(nonce, 0, 0, nonceBytes);
  const length = header.readUInt32BE(nonceBytes);
  header.fill(0);
  const body = readExactly(length);
  if (body === undefined) fail('stdin closed in the middle of the request');
  const request = parseJson(body.toString('utf8')) as ParserRequest;
  if (typeof request !== 'object' || request === null || request.v !== protocolVersion) {
    fail(`unsupported request (expected protocol version ${protocolVersion})`);
  }
  if (typeof request.parser !== 'string') fail('request.parser must be a string');
  return { nonce, request };
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

function respond(nonce: Buffer, responseJson: string, exitCode: number): never {
  const body = bufferFrom(responseJson, 'utf8');
  const frame = allocSlow(nonceBytes + lengthBytes + body.length);
  nonce.copy(frame, 0);
  frame.writeUInt32BE(body.length, nonceBytes);
  body.copy(frame, nonceBytes + lengthBytes);
  writeAll(frame);
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

async function main(): Promise<void> {
  const moduleUrl = process.argv[2];
  if (moduleUrl === undefined) fail('usage: runner <parser module URL>');
  writeAll(bufferFrom([readyByte]));
  const { nonce, request } = readRequest();
  const { parser, payload, kwargs, limits } = request;
  let namespace: Record<string, unknown>;
  try {
    namespace = (await import(moduleUrl)) as Record<string, unknown>;
  } catch (error) {
    respondError(nonce, {
      ok: false,
      kind: 'load-error',
      error: `cannot load parser module: ${describeThrown(error)}`,
    });
  }
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
