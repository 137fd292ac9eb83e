#!/usr/bin/env node
// The child side of the parser protocol: takes the nonce off stdin, imports the parser module,
// says it is ready, reads one request, calls one exported function and writes one framed
// response on fd 3, then exits. It runs under `node --permission` with the limits already in
// place; see docs/parser-protocol.md. A program, not a module: the host starts it by path, and
// the package exposes it as the `coda-parser-runner` command, never as an import.
//
// Everything the runner needs after the parser module has loaded is captured first, so a parser
// that replaces globals (JSON, Buffer, fs, process.exit) cannot change how the response is framed.
// The per-call nonce lives only in an off-heap Buffer inside this module's closure: a parser can
// write to any open descriptor, but without the nonce it cannot produce a frame the host accepts,
// and a heap snapshot (`v8.getHeapSnapshot()`) does not contain ArrayBuffer contents.
//
// Before the module loads, the runner also takes away what the permission model leaves open
// (see `lockDown`): descriptors inherited from the host, unix-domain sockets, every way to
// signal or reprioritise another process, and V8 flags set at run time.
import { closeSync, readdirSync, readFileSync, readSync, writeSync } from 'node:fs';
import { syncBuiltinESMExports } from 'node:module';
import os from 'node:os';
import v8 from 'node:v8';
import { resultRefusal } from '../protocol/json-cost.ts';
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

/** The `flags:` bit of /proc/self/fdinfo that says close-on-exec (O_CLOEXEC, octal 02000000). */
const closeOnExec = 0o2000000;
/** Read permission for it is granted in `nodeArguments` (src/spawn/node-command.ts). */
const descriptorInfoDir = '/proc/self/fdinfo';

/**
 * Closes every descriptor above the response channel that this process inherited. Node's
 * permission model does not check reads and writes on an open descriptor, and `spawn` passes on
 * every descriptor of the host that lacks close-on-exec. Node opens all of its own with
 * close-on-exec, so the ones without it (besides stdio and fd 3) are inherited.
 */
function closeInheritedDescriptors(): void {
  let names: string[];
  try {
    names = readdirSync(descriptorInfoDir);
  } catch (error) {
    // Without /proc (not Linux) there is nothing to read; on Linux, refuse to go on blind.
    if (process.platform !== 'linux') return;
    fail(`cannot list inherited descriptors: ${describeThrown(error)}`);
  }
  for (const name of names) {
    const fd = Number(name);
    if (!Number.isInteger(fd) || fd <= responseFd) continue;
    let info: string;
    try {
      info = readFileSync(`${descriptorInfoDir}/${name}`, 'latin1');
    } catch {
      continue; // the listing's own descriptor, closed by now
    }
    const flags = /^flags:\s*([0-7]+)$/m.exec(info)?.[1];
    if (flags !== undefined && (Number.parseInt(flags, 8) & closeOnExec) === 0) closeSync(fd);
  }
}

/** A stand-in for an API parsers may not use: throws like the permission model does. */
function unavailable(name: string): () => never {
  return function unavailableToParsers(): never {
    const error = new Error(
      `Access to this API has been restricted: ${name} is not available to parsers`,
    ) as NodeJS.ErrnoException;
    error.code = 'ERR_ACCESS_DENIED';
    throw error;
  };
}

function replace(owner: object, key: string, value: unknown): void {
  Object.defineProperty(owner, key, {
    value,
    writable: false,
    configurable: false,
    enumerable: Object.getOwnPropertyDescriptor(owner, key)?.enumerable ?? false,
  });
}

function takeAway(owner: object, key: string, name: string): void {
  replace(owner, key, unavailable(name));
}

/**
 * Unix-domain sockets are files the permission model does not check: `listen(path)` creates a
 * socket file anywhere the user may write, `connect(path)` reaches any socket (a container
 * engine's, a database's). Every such socket goes through the `bind` or `connect` of Node's
 * `Pipe` handle, whose prototype the stderr pipe shows; both now fail with EACCES, which Node
 * reports as `listen EACCES` / `connect EACCES`. Pipes the runner was given keep working.
 */
function closeUnixSockets(): void {
  const handle = (process.stderr as unknown as { _handle?: object })._handle;
  const pipe = handle === undefined ? undefined : (Object.getPrototypeOf(handle) as object);
  if (pipe?.constructor.name !== 'Pipe' || !hasOwn(pipe, 'bind') || !hasOwn(pipe, 'connect')) {
    fail('stderr is not a pipe: cannot close unix-domain sockets');
  }
  const denied = -os.constants.errno.EACCES;
  replace(pipe, 'bind', () => denied);
  replace(pipe, 'connect', () => denied);
}

/**
 * What the permission model leaves open and a parser must not have, taken away before the
 * module loads. The originals live only in Node's internal bindings, which `process.binding`
 * does not hand out under the permission model, so nothing can bring them back.
 *
 * - `process.kill`, `process._kill` (its raw binding) and `process._debugProcess` (SIGUSR1 to
 *   any pid: it opens that process's inspector) signal other processes; `os.setPriority`
 *   changes another process's priority. Without a pid namespace (`confinement: 'none'`) the
 *   host itself is among them. The runner needs none of them: it ends with `reallyExit`.
 * - `v8.setFlagsFromString` sets V8 flags at run time: `--trace-turbo --trace-turbo-path=DIR`
 *   writes files anywhere, `--allow-natives-syntax` opens V8's internal functions.
 *
 * `node:sqlite`, which reads and writes files past the permission model, is absent altogether
 * (`--no-experimental-sqlite`); see docs/parser-host.md for what each of the rest does.
 */
/**
 * Makes the typed-array accessors the runner's frames go through (`length`, `byteLength`, ...)
 * impossible to redefine or shadow: a parser that replaced `%TypedArray%.prototype.length` saw
 * the ready frame pass through its getter and copied the nonce out of it (found by our own
 * attack review). Each accessor is pinned, with its original getter, on every prototype a
 * Buffer inherits from.
 */
function pinTypedArrayAccessors(): void {
  const typedArrayPrototype = Object.getPrototypeOf(Uint8Array.prototype) as object;
  for (const name of ['length', 'byteLength', 'byteOffset', 'buffer']) {
    const get = Object.getOwnPropertyDescriptor(typedArrayPrototype, name)?.get;
    if (get === undefined) continue;
    for (const prototype of [typedArrayPrototype, Uint8Array.prototype, Buffer.prototype]) {
      Object.defineProperty(prototype, name, { get, enumerable: false, configurable: false });
    }
  }
}

function lockDown(): void {
  pinTypedArrayAccessors();
  closeInheritedDescriptors();
  closeUnixSockets();
  takeAway(process, 'kill', 'process.kill');
  takeAway(process, '_kill', 'process._kill');
  takeAway(process, '_debugProcess', 'process._debugProcess');
  takeAway(os, 'setPriority', 'os.setPriority');
  takeAway(v8, 'setFlagsFromString', 'v8.setFlagsFromString');
  // The ESM namespaces of node:os and node:v8 follow the CommonJS exports only when synced.
  syncBuiltinESMExports();
}

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
  // Over the cap, or more than the host would hold once it parsed it (the host checks again,
  // but need not receive it).
  const refusal = resultRefusal(dataJson, byteLength(dataJson, 'utf8'), maxOutputBytes);
  if (refusal !== undefined)
    respondError(nonce, { ok: false, kind: 'result-too-large', error: refusal });
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
  lockDown();
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
