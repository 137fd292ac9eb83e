#!/usr/bin/env node
// The child of `processModel: 'isolate'`: one long-lived, confined Node process per host that
// runs every call in a fresh isolated-vm isolate (its own V8 heap, no Node APIs) and disposes it
// after the call, so no state passes from one call to the next. A program, not a module: the host
// starts it by path under the permission model, with the isolated-vm addon as the one native
// module it may load. See docs/parser-host.md.
//
// Wire (all framed, big-endian lengths):
// - stdin, from the host: `[type 1][call id 4][length 4][body]`. Type 1 is a call, whose body is
//   the call's nonce, the length of the request envelope (4), the envelope (the spawn protocol's
//   request without its payload) and the payload's JSON text; type 2 cancels a call (no body).
// - fd 3, to the host: one response frame per answered call, exactly the spawn runner's
//   (`[nonce][length][body]`), so the host checks it with the same reader.
// - fd 4, to the host: JSON lines. `{"ready":true}` once the module graph is read; then for every
//   call, after its isolate is disposed, `{"end":ID,"reason":R}`; R is `answered` (its frame is
//   on fd 3), `timeout` (its wall clock), `cpu` (its CPU time) or `cancelled`.
//
// Parser code never holds a reference into this process: payload in and result out are strings
// copied across the isolate boundary, and the nonce never enters an isolate.
import { readFileSync, writeSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, sep } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type IvmNamespace from 'isolated-vm';
import { resultRefusal } from '../protocol/json-cost.ts';
import { lengthBytes, nonceBytes, responseFd } from '../protocol/wire.ts';

type Ivm = typeof IvmNamespace;
type Isolate = IvmNamespace.Isolate;
type Module = IvmNamespace.Module;

const controlFd = 4;
const callFrame = 1;
const cancelFrame = 2;
const frameHeaderBytes = 1 + 4 + 4;
const mebibyte = 1024 * 1024;
const errorMessageLimit = 16_384;
/** What isolated-vm's own `timeout` option ends a run with. */
const ivmTimeoutMessage = 'Script execution timed out.';
/** V8's RangeError message when an ArrayBuffer cannot be allocated. */
const arrayBufferRefused = 'Array buffer allocation failed';
/** How often a call's isolate's CPU time is compared with its `cpuSecs`. */
const cpuPollMs = 25;

/** Sleeps 1 ms: a non-blocking descriptor said EAGAIN. */
function pause(): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 1);
}

function writeAll(fd: number, bytes: Buffer): void {
  let written = 0;
  while (written < bytes.length) {
    try {
      written += writeSync(fd, bytes, written, bytes.length - written);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EAGAIN') throw error;
      pause();
    }
  }
}

function control(line: Record<string, unknown>): void {
  writeAll(controlFd, Buffer.from(`${JSON.stringify(line)}\n`, 'utf8'));
}

function respond(nonce: Buffer, responseJson: string): void {
  const body = Buffer.from(responseJson, 'utf8');
  const frame = Buffer.allocUnsafe(nonceBytes + lengthBytes + body.length);
  nonce.copy(frame, 0);
  frame.writeUInt32BE(body.length, nonceBytes);
  body.copy(frame, nonceBytes + lengthBytes);
  writeAll(responseFd, frame);
}

function cut(message: string): string {
  return message.length > errorMessageLimit ? `${message.slice(0, errorMessageLimit)}…` : message;
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/**
 * The heap limit of a call's isolate for its memory limit: half of it, as the spawn runner's
 * `--max-old-space-size` (heapLimitMiB in src/spawn/node-command.ts; isolated-vm's least is 8).
 */
function isolateMemoryMiB(memoryBytes: number): number {
  return Math.max(8, Math.floor(memoryBytes / mebibyte / 2));
}

/** One module of the parser's graph: its URL, its source, and the URLs its imports name. */
interface ModuleSource {
  url: string;
  source: string;
  imports: Map<string, string>;
}

/**
 * Reads the module and every module it imports, once, when the child starts. Only relative
 * imports that stay inside the module's directory are followed; any other specifier (`node:`,
 * a bare package name, a URL, a path outside it) is refused with an error naming it. V8 lists
 * each module's specifiers (a scratch isolate compiles it), so nothing is guessed from text.
 */
async function readModuleGraph(ivm: Ivm, entryPath: string): Promise<Map<string, ModuleSource>> {
  const root = dirname(entryPath) + sep;
  const graph = new Map<string, ModuleSource>();
  const scratch = new ivm.Isolate({ memoryLimit: 64 });
  try {
    const pending = [pathToFileURL(entryPath).href];
    while (pending.length > 0) {
      const url = pending.pop() as string;
      if (graph.has(url)) continue;
      const path = fileURLToPath(url);
      const source = readFileSync(path, 'utf8');
      const compiled = await scratch.compileModule(source, { filename: url });
      const imports = new Map<string, string>();
      for (const specifier of compiled.dependencySpecifiers) {
        const name = path.slice(root.length);
        if (!specifier.startsWith('./') && !specifier.startsWith('../')) {
          throw new Error(
            `import of '${specifier}' (in ${name}) is refused: processModel 'isolate' runs pure JavaScript without Node APIs or packages; only relative imports inside the module's directory are resolved`,
          );
        }
        const target = new URL(specifier, url);
        if (!fileURLToPath(target).startsWith(root)) {
          throw new Error(
            `import of '${specifier}' (in ${name}) is refused: it leads out of the module's directory`,
          );
        }
        imports.set(specifier, target.href);
        pending.push(target.href);
      }
      compiled.release();
      graph.set(url, { url, source, imports });
    }
  } finally {
    scratch.dispose();
  }
  return graph;
}

/**
 * What `start` throws when it has started the parser. Both bootstrap functions end by throwing
 * a string (isolated-vm copies a thrown primitive as it is): a task that returns makes
 * isolated-vm copy the reason of an unhandled rejection at its end, outside the timeout, reading
 * its properties, so proxy traps and getters of that reason ran there again after every
 * interrupt, the dispose at the wall clock did not stop them, and the host killed the child with
 * every call on it (attack-25, `Promise.reject(new Proxy({}, { get() { for (;;) {} } }))`). A
 * task that throws skips that copy; the parser's microtasks still run first, in the timed call.
 */
const startedSignal = 'parser started';

/** The outcomes the bootstrap delivers (see {@link bootstrapSource}). */
const outcomeKinds = new Set(['ok', 'threw', 'bad', 'unknown']);

/**
 * Runs inside each isolate before the module: takes the intrinsics the call needs before parser
 * code can replace them, and returns [call, collect]. `call` starts the parser and throws
 * {@link startedSignal}; it also takes the host's `deliver` callback, which gets how the call went
 * the moment it is known, as `kind` and `text`: `ok` (text the JSON), `threw` (the message),
 * `bad` (not JSON) or `unknown` (text empty). Delivered in the call's own task (its microtasks
 * run before it ends), an outcome cannot be held back by a task V8 runs after it: a
 * FinalizationRegistry callback that spins, due after a full collection during the call, ran
 * before `collect` and turned a parser that had returned into a timeout (3 of 6 calls). Only a
 * promise still pending needs `collect`, a later task, which throws `kind\ntext` the same way,
 * or `pending` when it never settled. Every outcome is a string the bootstrap made.
 *
 * It also removes `WebAssembly`: a WebAssembly.Memory lives outside the isolate's heap and is
 * not counted by its memoryLimit (a 64 MiB call grew one to 2 GiB and filled it, the child's
 * cgroup killed the child, and the call beside it failed CRASH). No other global reaches it.
 * The same holds for the other memory isolated-vm's limit does not count (attack-25: each of
 * these, in a 64 MiB call, filled the child's cgroup and took the call beside it down): a
 * resizable ArrayBuffer or growable SharedArrayBuffer commits its pages on resize, outside the
 * allocator, so the ArrayBuffer constructor refuses options (it is a Proxy, also set as its
 * prototype's constructor: the native one is reachable nowhere else with options) and
 * SharedArrayBuffer is removed; `Intl` objects hold ICU memory off the V8 heap, so `Intl` is
 * removed (toLocaleString and localeCompare keep working: V8 frees what they use).
 */
const bootstrapSource = `(() => {
  'use strict';
  delete globalThis.WebAssembly;
  delete globalThis.SharedArrayBuffer;
  delete globalThis.Intl;
  const NativeArrayBuffer = ArrayBuffer, construct = Reflect.construct, Refused = TypeError;
  const FixedArrayBuffer = new Proxy(NativeArrayBuffer, {
    construct(target, args, newTarget) {
      const options = args[1];
      if ((typeof options === 'object' && options !== null) || typeof options === 'function') {
        throw new Refused("resizable ArrayBuffers are not available with processModel 'isolate' (their memory is outside the isolate's limit)");
      }
      return construct(target, [args[0]], newTarget);
    },
  });
  globalThis.ArrayBuffer = FixedArrayBuffer;
  NativeArrayBuffer.prototype.constructor = FixedArrayBuffer;
  const parse = JSON.parse, stringify = JSON.stringify, hasOwn = Object.hasOwn;
  const resolve = Promise.resolve.bind(Promise), then = Promise.prototype.then;
  const apply = Reflect.apply, ErrorType = Error, toText = String;
  const describe = (thrown) => {
    try { return thrown instanceof ErrorType ? toText(thrown.message) : toText(thrown); }
    catch { return 'parser threw a value that cannot be described'; }
  };
  let outcome = ['pending', ''], deliver;
  const record = (kind, text) => { outcome = [kind, text]; deliver(kind, text); };
  const settle = (value) => {
    let json;
    try { json = stringify(value); }
    catch (error) { record('bad', describe(error)); return; }
    record('ok', json === undefined ? 'null' : json);
  };
  return [
    (namespace, name, payloadJson, kwargsJson, hostDeliver) => {
      deliver = hostDeliver;
      try {
        const fn = hasOwn(namespace, name) ? namespace[name] : undefined;
        if (typeof fn !== 'function') record('unknown', '');
        else apply(then, resolve(fn(parse(payloadJson), parse(kwargsJson))), [settle, (error) => { record('threw', describe(error)); }]);
      } catch (error) { record('threw', describe(error)); }
      throw '${startedSignal}';
    },
    () => { throw outcome[0] + '\\n' + outcome[1]; },
  ];
})()`;

/** One call in this child. */
interface Call {
  id: number;
  nonce: Buffer;
  envelope: {
    parser: string;
    kwargs: Record<string, unknown>;
    limits: { timeout: number; memoryBytes: number; cpuSecs: number; maxOutputBytes: number };
  };
  kwargsJson: string;
  payloadJson: string;
  isolate?: Isolate;
  ended?: 'timeout' | 'cpu' | 'cancelled';
  /** Its share of the isolates' CPU time so far, in microseconds (see #pollCpu). */
  cpuShareUs: number;
}

/** CPU time of this process's threads other than this one (the isolates'), in microseconds. */
function isolateThreadsCpuUs(): number {
  const all = process.cpuUsage();
  const main = process.threadCpuUsage();
  return all.user + all.system - main.user - main.system;
}

class IsolateServer {
  readonly #ivm: Ivm;
  readonly #graph: Map<string, ModuleSource> | undefined;
  readonly #loadFailure: string | undefined;
  readonly #entryUrl: string;
  readonly #calls = new Map<number, Call>();
  #cpuPoll: NodeJS.Timeout | undefined;
  #cpuSeen = 0;

  constructor(ivm: Ivm, entryUrl: string, loaded: Map<string, ModuleSource> | string) {
    this.#ivm = ivm;
    this.#entryUrl = entryUrl;
    if (typeof loaded === 'string') this.#loadFailure = loaded;
    else this.#graph = loaded;
  }

  cancel(id: number): void {
    const call = this.#calls.get(id);
    if (call === undefined) return;
    this.#end(call, 'cancelled');
  }

  /** Ends a call early: its isolate is disposed, which stops whatever runs in it. */
  #end(call: Call, reason: 'timeout' | 'cpu' | 'cancelled'): void {
    call.ended ??= reason;
    if (call.isolate !== undefined && !call.isolate.isDisposed) call.isolate.dispose();
  }

  async run(call: Call): Promise<void> {
    this.#calls.set(call.id, call);
    const { limits } = call.envelope;
    const deadline = setTimeout(() => this.#end(call, 'timeout'), limits.timeout);
    if (this.#cpuPoll === undefined) {
      this.#cpuSeen = isolateThreadsCpuUs();
      this.#cpuPoll = setInterval(() => this.#pollCpu(), cpuPollMs);
    }
    let answer: string | undefined;
    try {
      answer = await this.#answer(call);
    } catch (error) {
      // isolated-vm disposed the isolate at its memory limit, or its own timeout fired; or we
      // disposed it (timeout, CPU, cancel), which `ended` already says.
      if (call.ended === undefined && call.isolate?.isDisposed === true) {
        answer = JSON.stringify({
          ok: false,
          kind: 'memory-exceeded',
          error: `memory limit exceeded: the isolate's heap limit (${isolateMemoryMiB(limits.memoryBytes)} MiB)`,
        });
      } else if (call.ended === undefined && describe(error) === ivmTimeoutMessage) {
        call.ended = 'timeout';
      } else if (call.ended === undefined) {
        answer = JSON.stringify({ ok: false, kind: 'parser-error', error: cut(describe(error)) });
      }
    } finally {
      clearTimeout(deadline);
      if (call.isolate !== undefined && !call.isolate.isDisposed) call.isolate.dispose();
      this.#calls.delete(call.id);
      if (this.#calls.size === 0) {
        clearInterval(this.#cpuPoll);
        this.#cpuPoll = undefined;
      }
    }
    if (call.ended === undefined && answer !== undefined) {
      respond(call.nonce, answer);
      control({ end: call.id, reason: 'answered' });
    } else {
      control({ end: call.id, reason: call.ended ?? 'timeout' });
    }
  }

  /**
   * Ends each call over its `cpuSecs`. isolated-vm's `cpuTime` counts the part of a task still
   * running by the wall clock (it cannot read another thread's CPU clock), so with more calls
   * running than cores a benign call was ended `CPU time limit exceeded` by the time the others
   * took from it (attack-25: 0.5 s of CPU beside five spinning calls, `cpuSecs: 1`). A call is
   * now charged an equal share of the CPU the isolate threads used while it ran, and ended only
   * when both that share and `cpuTime` (never less than its CPU) are over its limit.
   */
  #pollCpu(): void {
    const now = isolateThreadsCpuUs();
    const spent = Math.max(0, now - this.#cpuSeen);
    this.#cpuSeen = now;
    const running = [...this.#calls.values()].filter(
      (call) => call.isolate !== undefined && !call.isolate.isDisposed,
    );
    for (const call of running) {
      call.cpuShareUs += spent / running.length;
      const bound = call.envelope.limits.cpuSecs * 1_000_000;
      const isolate = call.isolate as Isolate;
      if (call.cpuShareUs > bound && isolate.cpuTime > BigInt(bound) * 1_000n) {
        this.#end(call, 'cpu');
      }
    }
  }

  /** Runs the call in a fresh isolate and returns its response body (JSON). */
  async #answer(call: Call): Promise<string> {
    const error = (kind: string, message: string): string =>
      JSON.stringify({ ok: false, kind, error: cut(message) });
    if (this.#loadFailure !== undefined) return error('load-error', this.#loadFailure);
    const { limits, parser } = call.envelope;
    const ivm = this.#ivm;
    const isolate = new ivm.Isolate({ memoryLimit: isolateMemoryMiB(limits.memoryBytes) });
    call.isolate = isolate;
    if (call.ended !== undefined) throw new Error('ended');
    const timeout = Math.max(1, limits.timeout);
    const context = await isolate.createContext();
    const entry = await context.eval(bootstrapSource, { reference: true, timeout });
    const start = (await entry.get(0, { reference: true })) as IvmNamespace.Reference;
    const collect = (await entry.get(1, { reference: true })) as IvmNamespace.Reference;
    let namespace: IvmNamespace.Reference;
    const loading = performance.now();
    try {
      namespace = await this.#evaluateModule(isolate, context, timeout);
    } catch (thrown) {
      if (isolate.isDisposed) throw thrown;
      const message = describe(thrown);
      // isolated-vm's timeout only once the time is up: module code can throw the same words
      // (found by an attack review: TIMEOUT after 251 ms of a 3 s timeout).
      if (message === ivmTimeoutMessage && performance.now() - loading >= timeout - 1) {
        throw thrown;
      }
      return error('load-error', `cannot load parser module: ${message}`);
    }
    // The first outcome only, of a kind the bootstrap makes, as strings: what reaches `deliver`
    // is trusted no further than the bootstrap's strictness keeps parser code from it (a review
    // reached `settle` through a sloppy toJSON's `arguments.callee.caller` before it was strict).
    let delivered: string | undefined;
    const deliver = new ivm.Callback((kind: unknown, text: unknown) => {
      if (delivered !== undefined || typeof kind !== 'string' || typeof text !== 'string') return;
      if (outcomeKinds.has(kind)) delivered = `${kind}\n${text}`;
    });
    const signal = await start
      .apply(
        undefined,
        [namespace.derefInto(), parser, call.payloadJson, call.kwargsJson, deliver],
        { timeout },
      )
      .catch((thrown: unknown) => thrown);
    if (signal !== startedSignal) throw signal;
    const said =
      delivered ??
      (await collect.apply(undefined, [], { timeout }).catch((thrown: unknown) => thrown));
    if (typeof said !== 'string') throw said;
    const newline = said.indexOf('\n');
    const kind = said.slice(0, newline);
    const text = said.slice(newline + 1);
    if (kind === 'unknown') return error('unknown-parser', `Unknown parser: ${parser}`);
    if (kind === 'pending') {
      return error('never-settled', 'parser returned a promise that never settled');
    }
    // What V8 throws for an ArrayBuffer the isolate's limit refuses: memory, as in spawn mode
    // (where a Buffer bomb meets the cgroup). A parser that throws these words itself only
    // changes its own call's code.
    if (kind === 'threw' && text === arrayBufferRefused) {
      return error(
        'memory-exceeded',
        `memory limit exceeded: ${text} (the isolate's limit, ${isolateMemoryMiB(limits.memoryBytes)} MiB)`,
      );
    }
    if (kind === 'threw') return error('parser-error', text);
    if (kind === 'bad') return error('invalid-result', `parser result is not JSON: ${text}`);
    return encodeResult(text, limits.maxOutputBytes);
  }

  /** Compiles the module graph afresh in this isolate and evaluates it; returns its namespace. */
  async #evaluateModule(
    isolate: Isolate,
    context: IvmNamespace.Context,
    timeout: number,
  ): Promise<IvmNamespace.Reference> {
    const graph = this.#graph as Map<string, ModuleSource>;
    const compiled = new Map<string, Module>();
    const urls = new Map<Module, string>();
    for (const { url, source } of graph.values()) {
      const module = await isolate.compileModule(source, { filename: url });
      compiled.set(url, module);
      urls.set(module, url);
    }
    const entry = compiled.get(this.#entryUrl) as Module;
    await entry.instantiate(context, (specifier, referrer) => {
      const from = graph.get(urls.get(referrer) as string);
      const target = from?.imports.get(specifier);
      const module = target === undefined ? undefined : compiled.get(target);
      if (module === undefined) throw new Error(`import of '${specifier}' is refused`);
      return module;
    });
    await entry.evaluate({ timeout });
    return entry.namespace;
  }
}

/** The response body for a result's JSON text, under the output cap and the memory budget. */
function encodeResult(dataJson: string, maxOutputBytes: number): string {
  const refusal = resultRefusal(dataJson, Buffer.byteLength(dataJson, 'utf8'), maxOutputBytes);
  if (refusal !== undefined) {
    return JSON.stringify({ ok: false, kind: 'result-too-large', error: refusal });
  }
  return `{"ok":true,"data":${dataJson}}`;
}

/**
 * Reads the host's frames off stdin and hands each to the server. Chunks are kept in a list and
 * joined once a frame is whole, so a 16 MiB payload in 64 KiB reads is copied once, not 256 times.
 */
function readFrames(server: IsolateServer): void {
  const chunks: Buffer[] = [];
  let buffered = 0;
  let needed = frameHeaderBytes;
  const take = (length: number): Buffer => {
    const joined = chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks);
    chunks.length = 0;
    const taken = joined.subarray(0, length);
    if (joined.length > length) chunks.push(joined.subarray(length));
    buffered -= length;
    return taken;
  };
  let header: Buffer | undefined;
  process.stdin.on('data', (chunk: Buffer) => {
    chunks.push(chunk);
    buffered += chunk.length;
    while (buffered >= needed) {
      if (header === undefined) {
        header = take(frameHeaderBytes);
        needed = header.readUInt32BE(5);
        if (needed > 0) continue;
      }
      const type = header[0];
      const id = header.readUInt32BE(1);
      const body = take(needed);
      header = undefined;
      needed = frameHeaderBytes;
      if (type === cancelFrame) server.cancel(id);
      else if (type === callFrame) void server.run(decodeCall(id, body));
      else fail(`unknown frame type ${type}`);
    }
  });
  // The host is gone: nothing more will come, and nobody reads what this child would write.
  process.stdin.on('end', () => process.exit(0));
}

function decodeCall(id: number, body: Buffer): Call {
  const nonce = Buffer.from(body.subarray(0, nonceBytes));
  const envelopeLength = body.readUInt32BE(nonceBytes);
  const envelopeStart = nonceBytes + lengthBytes;
  const envelopeText = body.toString('utf8', envelopeStart, envelopeStart + envelopeLength);
  const envelope = JSON.parse(envelopeText) as Call['envelope'];
  return {
    id,
    nonce,
    envelope,
    kwargsJson: JSON.stringify(envelope.kwargs ?? {}),
    payloadJson: body.toString('utf8', envelopeStart + envelopeLength),
    cpuShareUs: 0,
  };
}

function fail(message: string): never {
  process.stderr.write(`parser isolate runner: ${message}\n`);
  process.exit(2);
}

async function main(): Promise<void> {
  const [modulePath, addonPath] = process.argv.slice(2);
  if (modulePath === undefined || addonPath === undefined) {
    fail('usage: isolate-runner <parser module path> <isolated-vm addon path>');
  }
  // The addon itself, as isolated-vm's own entry loads it (`node-gyp-build(dir).ivm`): the host
  // found its path, so this child reads that one file and no package resolution happens here.
  const ivm = (createRequire(import.meta.url)(addonPath) as { ivm: Ivm }).ivm;
  let loaded: Map<string, ModuleSource> | string;
  try {
    loaded = await readModuleGraph(ivm, modulePath);
  } catch (error) {
    loaded = `cannot load parser module: ${describe(error)}`;
  }
  const server = new IsolateServer(ivm, pathToFileURL(modulePath).href, loaded);
  control(typeof loaded === 'string' ? { ready: true, loadError: loaded } : { ready: true });
  readFrames(server);
}

void main();
