// The script that prepares every isolate's context before user code runs. It lives in the
// isolate, so it is a string: it must not depend on anything the host build pipeline could
// inject (coverage counters, helpers), and it must survive user code tampering with builtins.
//
// Arguments: $0 = status callback (sync ivm.Callback: source, level, message, dataJson?),
// $1 = data Reference (async host function: paramsJson | null, units, refusal ('' | 'depth' |
// 'size' | 'values') → ['1' + json | '0' + message | '2' + token of a big answer], one string in an array, see context-builder.ts), $2 = WASM modules as [name, bytes, bindingSource | null][], $3 = deliver
// callback (ivm.Callback, fire and forget: the run's outcome text), $4 = the nesting depth limit,
// $5 = the same delivery as a synchronous ivm.Callback, $6 = the names of the configured tools
// (each becomes `tools.NAME(input)`, a data request whose fourth argument is NAME; an input of
// undefined crosses as ''), $7 = timer Reference (async host function: id, delayMs → '1' when
// the timer is due, '0' when it will never fire), $8 = clear-timer callback (ivm.Callback, fire and
// forget: id), $9 = breach callback (sync ivm.Callback: field, size, label; the host ends the execution
// with LIMIT_EXCEEDED, or VALIDATION for the depth, and disposes the isolate before it returns),
// $10 = this isolate's own ivm.Isolate (only its heap figures are read, through isolated-vm's
// same-isolate path), $11 = big-answer callback (sync ivm.Callback: token, heap room in bytes →
// '1' + json | '0' + message), $12 = idle-probe Reference (async host function: → '1' at once),
// $13 = idle callback (ivm.Callback, fire and forget: requests, answers; see probeIdle).
// It captures them in this closure (they are never reachable from the global object) and
// returns `[run]`, a function whose Reference only the host holds.
//
// `run(code, limitsJson, synchronous)` starts user code and delivers its outcome as a string,
// never an object: resolving a promise with an object looks up its `then`, which user code could
// have planted on a prototype. The string is `kind\ndropped\nheap\nbody`, where kind is ok |
// too-big | too-deep | unsupported | unserializable | throw | oom (an error the allocator's
// refusal made, checked by the bootstrap, or more than memoryMb held after a full collection as
// the run ends or as a data answer arrives: heapPassed) |
// syntax (the code does not compile; the host finds where, see user-code-location.ts) and heap
// the bytes of heap in use as it ends.
//
// No user value ever leaves through isolated-vm itself: isolated-vm copies an unhandled
// rejection's reason at the end of every task it runs in the isolate (reading its message, stack
// and name, so getters, proxy traps and Error.prepareStackTrace run there, outside any timeout,
// and a dispose stops only the first of those reads). So `run` never returns: it ends by throwing
// `runEnded`, a string, which makes isolated-vm skip that end-of-task copy (user code's microtasks
// still run first, in the same timed call), and the host starts no other task in this isolate after
// it (heap figures are read here; a big answer's room is checked here). A rejection nobody handles
// is thus never read by anyone, and changes no outcome.
//
// User code can redefine every prototype, so after it starts the bootstrap never awaits, never
// runs an async function and never calls anything it did not capture first: `await p` reads
// `p.constructor` (a getter user code may plant on Promise.prototype) and may call `p.then`,
// which let user code hand the bootstrap a forged outcome. Promises are observed with the
// captured `Promise.prototype.then` on a promise whose own `constructor` is set to undefined (so
// the species lookup falls back to the intrinsic Promise). Values are encoded by `encode`, an
// iterative JSON encoder that refuses what JSON would change or drop (naming its path), stops as
// soon as a size, depth or value budget is passed, and uses no array method and no prototype. Called with `synchronous` (through applySync, on the host's thread), it
// delivers through $5, a callback that blocks until the host has the outcome:
// an outcome reached before the call returns is with the host when it returns, and one reached
// later arrives from the isolate's thread. Otherwise
// `run` delivers through $3.

/** Source of the isolate bootstrap; see the file comment for its contract. */
export const bootstrapSource = String.raw`'use strict';
const emitStatus = $0;
const dataRef = $1;
const wasmModules = $2;
const deliver = $3;
const maxDepth = $4;
const deliverNow = $5;
const toolNames = $6;
const timerRef = $7;
const clearTimer = $8;
const reportBreach = $9;
const self = $10;
const takeAnswer = $11;
const probeRef = $12;
const reportIdle = $13;
const probeApply = probeRef.apply;
const readHeap = self.getHeapStatisticsSync;
const runEnded = 'sandbox:run-ended';
const timerApply = timerRef.apply;
const dataApply = dataRef.apply;
const global = globalThis;
const stringify = JSON.stringify;
const parse = JSON.parse;
const StringCtor = String;
const ErrorCtor = Error;
const TypeErrorCtor = TypeError;
const RangeErrorCtor = RangeError;
const ReflectApply = Reflect.apply;
const FunctionCtor = Function;
const AsyncFunction = (async function () {}).constructor;
const PromiseCtor = Promise;
const PromiseThen = Promise.prototype.then;
const PromiseReject = Promise.reject;
const PromiseResolve = Promise.resolve;
const DateNow = Date.now;
const ObjectKeys = Object.keys;
const ObjectGetPrototypeOf = Object.getPrototypeOf;
const ObjectDefineProperty = Object.defineProperty;
const ReflectDefineProperty = Reflect.defineProperty;
const ObjectGetOwnPropertyDescriptor = Object.getOwnPropertyDescriptor;
const ObjectPrototype = Object.prototype;
const ObjectFreeze = Object.freeze;
const ArrayIsArray = Array.isArray;
const NumberIsFinite = Number.isFinite;
const ArrayBufferIsView = ArrayBuffer.isView;
const stringSlice = String.prototype.slice;
const StringCharCodeAt = String.prototype.charCodeAt;
const StringIndexOf = String.prototype.indexOf;
const escapeText = escape;
const RegExpTest = RegExp.prototype.test;
const identifierPattern = /^[A-Za-z_$][\w$]*$/;
// Brand checks (each throws for anything else): messages can say "a Map", not "an object".
// The functions are captured here, before user code runs; the list is built on first use (most
// isolates never refuse a value).
const MapSize = ObjectGetOwnPropertyDescriptor(Map.prototype, 'size').get;
const SetSize = ObjectGetOwnPropertyDescriptor(Set.prototype, 'size').get;
const WeakMapHas = WeakMap.prototype.has;
const WeakSetHas = WeakSet.prototype.has;
const ArrayBufferByteLength = ObjectGetOwnPropertyDescriptor(ArrayBuffer.prototype, 'byteLength').get;
const RegExpSource = ObjectGetOwnPropertyDescriptor(RegExp.prototype, 'source').get;
const DateGetTime = Date.prototype.getTime;
let brands = null;
function brandList() {
  brands = [
    'a Map', MapSize, 'a Set', SetSize, 'a WeakMap', WeakMapHas, 'a WeakSet', WeakSetHas,
    'an ArrayBuffer', ArrayBufferByteLength, 'a RegExp', RegExpSource, 'a Date', DateGetTime,
  ];
  return brands;
}
const ErrorIsError = typeof Error.isError === 'function' ? Error.isError : undefined;
const applyOptions = {
  __proto__: null,
  arguments: { __proto__: null, copy: true },
  result: { __proto__: null, promise: true, copy: true },
};

let limits = null;
let statusEvents = 0;
let statusUnits = 0;
let consoleCalls = 0;
let dropped = 0;
let dataCalls = 0;
// Data requests and tool calls that crossed to the host, and the answers that came back (see
// probeIdle).
let crossings = 0;
let answers = 0;
// UTF-16 units of params and answers that crossed: a lower bound of the host's maxDataBytes count.
let dataUnits = 0;
// A tier 2 limit was passed: the host ends the execution (the breach callback disposes the
// isolate, so nothing after it runs); until it does, every bridge call gets this one rejection.
let breached = null;

// Tells the host a limit was passed. Final: the host disposes the isolate inside the callback, so
// user code never resumes (catching, not awaiting or looping cannot outlive it). The rejection is
// what a call gets should the host not have ended it (a host that lost the isolate already).
function breach(field, size, message, label) {
  if (breached === null) {
    breached = ReflectApply(PromiseReject, PromiseCtor, [new ErrorCtor(message)]);
    observe(breached, undefined, noop);
  }
  reportBreach(field, size, label);
  return breached;
}

function noop() {}

// A figure of this isolate's heap, read through isolated-vm's same-isolate path (no task, so no
// end-of-task copy; see the file comment). isolated-vm fills the object it makes here with
// ordinary assignments, which consult Object.prototype: the names read below are reserved there
// first (reserveFigure), so that no setter or read-only property user code plants can hide one.
function heapFigures() {
  let stats = null;
  try {
    stats = ReflectApply(readHeap, self, []);
  } catch {}
  return stats;
}

function figure(stats, key) {
  const descriptor = stats === null ? undefined : ObjectGetOwnPropertyDescriptor(stats, key);
  const value = descriptor === undefined ? undefined : descriptor.value;
  return typeof value === 'number' && NumberIsFinite(value) && value > 0 ? value : 0;
}

// Reserves a heap figure's name on Object.prototype before user code runs: a non-configurable
// accessor whose setter makes the assigned value an own data property of the receiver, as an
// ordinary assignment would. User code can no longer plant a setter or a read-only property of
// that name (one did, and a heap past its limit ended with a result in 20 of 20 runs); what it
// sees is an inherited accessor that reads undefined, and the name among Object.prototype's keys.
function reserveFigure(key) {
  ObjectDefineProperty(ObjectPrototype, key, {
    __proto__: null,
    get: undefined,
    set(value) {
      if ((typeof this === 'object' && this !== null) || typeof this === 'function') {
        ReflectDefineProperty(this, key, { __proto__: null, value, writable: true, enumerable: true, configurable: true });
      }
    },
  });
}
// Every name isolated-vm 7 assigns, in its order (isolate_handle.cc, GetHeapStatistics): a setter
// that throws on any one of them would abort the whole read, so all are reserved, not only those
// read here. Runs before user code, so the loop's own reads are untouched.
const heapFigureNames = [
  'total_heap_size', 'total_heap_size_executable', 'total_physical_size', 'total_available_size',
  'used_heap_size', 'heap_size_limit', 'malloced_memory', 'peak_malloced_memory', 'does_zap_garbage',
  'externally_allocated_size',
];
for (let i = 0; i < heapFigureNames.length; i++) reserveFigure(heapFigureNames[i]);

// The heap's limit as the isolate was made (memoryLimit plus V8's young generation; 0 when
// unknown). V8 cannot pass it: when a full collection leaves more live than it, isolated-vm raises
// the limit by 1 GiB and ends the run from a later interrupt, which may come only after user code
// has returned, with the heap already far past it (a CI run returned a result at 54 MB under a
// 32 MiB limit). Read now, before user code, so a raised limit never counts as room.
const heapLimit = figure(heapFigures(), 'heap_size_limit');

// Runs a full collection: isolated-vm's allocator, asked for a buffer past memoryMb, collects
// (LowMemoryNotification) before it refuses. 2^52 bytes is past any point up to which the
// allocator trusts its cached heap figure; the refusal throws nothing user code can see.
function collectGarbage() {
  try {
    new ArrayBufferCtor(4503599627370496);
  } catch {}
}

// Bytes of heap in use at the last heapPassed() (after its collection, when it ran one): the
// figure an outcome reports (0 when nothing ran: a syntax error).
let heapInUse = 0;

// Whether the run holds more than memoryMb now: heap in use plus external buffers, as isolated-vm
// counts memoryMb, after a full collection. isolated-vm checks this itself when a script run
// returns, but a run here never returns (it throws runEnded, see the file comment), and while
// it runs isolated-vm only raises V8's limit by 1 GiB when a collection left more live than the
// limit, ending the run from an interrupt that may come after user code dropped what it held or
// returned (a CI run returned a result at 54 MB under 32 MiB). The figure alone counts garbage
// (31 MiB live and 2 MiB of temporaries is no breach), so the collection decides; it runs only
// when the figure is past memoryMb, and a run well inside its limit pays one read.
// allowance: bytes the bootstrap itself holds and does not count (a body it encoded).
function heapPassed(allowance = 0) {
  let stats = heapFigures();
  heapInUse = figure(stats, 'used_heap_size');
  const memoryMb = limits !== null && typeof limits.memoryMb === 'number' ? limits.memoryMb : 0;
  if (memoryMb === 0) return false;
  const limit = memoryMb * 1048576 + allowance;
  if (heapInUse + figure(stats, 'externally_allocated_size') <= limit) return false;
  collectGarbage();
  stats = heapFigures();
  heapInUse = figure(stats, 'used_heap_size');
  return heapInUse + figure(stats, 'externally_allocated_size') > limit;
}

// Bytes the heap can still take below its limit (0 when unknown).
function heapRoom() {
  const stats = heapFigures();
  const room = heapLimit - figure(stats, 'used_heap_size') - figure(stats, 'externally_allocated_size');
  return room > 0 ? room : 0;
}

function cap(text, max) {
  return text.length > max ? ReflectApply(stringSlice, text, [0, max]) : text;
}

// Console text: best effort, never a refusal (a Map prints as {}, as in a browser's JSON).
function toText(value) {
  if (typeof value === 'string') return value;
  try {
    const json = stringify(value);
    if (json !== undefined) return json;
  } catch {}
  try {
    return StringCtor(value);
  } catch {
    return '[unprintable]';
  }
}

// Why a non-plain object cannot be encoded, in words for the error.
function describeObject(value) {
  if (ArrayBufferIsView(value)) return 'a typed array or DataView';
  const list = brands === null ? brandList() : brands;
  for (let index = 0; index < list.length; index += 2) {
    try {
      ReflectApply(list[index + 1], value, [value]);
      return list[index];
    } catch {}
  }
  try {
    if (ErrorIsError !== undefined && ErrorIsError(value)) return 'an Error';
  } catch {}
  try {
    const ctor = value.constructor;
    const name = typeof ctor === 'function' ? ctor.name : undefined;
    if (typeof name === 'string' && name !== '') return 'an instance of ' + cap(name, 100);
  } catch {}
  return 'an object with a prototype';
}

function describePrimitive(value) {
  const type = typeof value;
  if (type === 'number') return value !== value ? 'NaN' : value > 0 ? 'Infinity' : '-Infinity';
  if (type === 'undefined') return 'undefined';
  if (type === 'function') return 'a function';
  if (type === 'symbol') return 'a symbol';
  if (type === 'bigint') return 'a BigInt';
  return 'a ' + type;
}

// The path of the value a frame is at, from the root's name: result.items[3].name.
function pathOf(name, frame) {
  let path = '';
  for (let at = frame; at !== null; at = at.parent) {
    const index = at.index - 1;
    if (at.array) path = '[' + index + ']' + path;
    else {
      const key = at.keys[index];
      path =
        (ReflectApply(RegExpTest, identifierPattern, [key]) ? '.' + key : '[' + stringify(key) + ']') +
        path;
    }
  }
  return name + path;
}

function refusal(reason, name, frame, what, units) {
  return { __proto__: null, reason, path: pathOf(name, frame), what, units };
}

// UTF-16 units of text the encoder builds before it flattens them onto what it built before.
const encoderChunkUnits = 4096;

// Bytes the text encode() returned last takes in the heap, at most (checkedOutcome's allowance).
let encodedBytes = 0;

// Bytes a flat chunk of text takes: V8 keeps it at one byte a unit unless a unit is past U+00FF,
// and then at two. escape() writes those units, and only those, as %uXXXX; it reads a slice at a
// time so that its copy stays small. Counting two a unit for all (a helper's attack) let a run
// returning 2 MB of ASCII hold about 1.9 MiB more than memoryMb unseen.
function chunkBytes(chunk) {
  for (let at = 0; at < chunk.length; at += encoderChunkUnits) {
    const part = ReflectApply(stringSlice, chunk, [at, at + encoderChunkUnits]);
    if (ReflectApply(StringIndexOf, escapeText(part), ['%u']) !== -1) return chunk.length * 2;
  }
  return chunk.length;
}

// JSON text of value (what JSON.stringify makes for a JSON-safe value, toJSON included), or a
// refusal { reason: 'type' | 'depth' | 'size' | 'values', path, what, units }. Iterative, so no
// depth overflows the stack; stops at once when maxUnits UTF-16 units or maxValues values are
// passed. Getters, proxies and toJSON run here, in user code's time.
// Each += makes a rope node (about 24 bytes) over what came before: a million numbers made two
// million, and a 2 MB result of zeros ended OOM under memoryMb 32. So the text is built in a
// chunk that is flattened (charCodeAt flattens a rope in place) and appended to the rest once it
// holds encoderChunkUnits: the nodes left are two per chunk.
function encode(root, name, maxUnits, maxValues) {
  // No value at all (a function body without return) is null, as before; undefined inside an
  // array is refused (JSON would turn it into null).
  encodedBytes = 0;
  if (root === undefined) return 'null';
  let done = '';
  let doneBytes = 0;
  let text = '';
  let values = 0;
  let depth = 0;
  let frame = null;
  let value = root;
  let key = '';
  let pendingValue = true;
  for (;;) {
    if (pendingValue) {
      pendingValue = false;
      if (++values > maxValues) return refusal('values', name, frame, 'too many values', done.length + text.length);
      if (value !== null && typeof value === 'object') {
        const toJSON = value.toJSON;
        if (typeof toJSON === 'function') value = ReflectApply(toJSON, value, [key]);
      }
      const type = typeof value;
      if (value === null) text += 'null';
      else if (type === 'string') text += stringify(value);
      else if (type === 'boolean') text += value ? 'true' : 'false';
      else if (type === 'number') {
        if (!NumberIsFinite(value)) return refusal('type', name, frame, describePrimitive(value), 0);
        text += '' + value;
      } else if (type === 'object') {
        const array = ArrayIsArray(value);
        if (!array) {
          const proto = ObjectGetPrototypeOf(value);
          if (proto !== ObjectPrototype && proto !== null) {
            return refusal('type', name, frame, describeObject(value), 0);
          }
        }
        if (depth >= maxDepth) return refusal('depth', name, frame, 'too deep', 0);
        for (let at = frame; at !== null; at = at.parent) {
          if (at.value === value) return refusal('type', name, frame, 'a circular reference', 0);
        }
        const keys = array ? null : ObjectKeys(value);
        const length = array ? value.length : keys.length;
        frame = { __proto__: null, parent: frame, value, array, keys, index: 0, length, members: 0 };
        depth++;
        text += array ? '[' : '{';
      } else {
        return refusal('type', name, frame, describePrimitive(value), 0);
      }
      if (text.length >= encoderChunkUnits) {
        ReflectApply(StringCharCodeAt, text, [0]);
        doneBytes += chunkBytes(text);
        done += text;
        text = '';
      }
      if (done.length + text.length > maxUnits) {
        return refusal('size', name, frame, 'too big', done.length + text.length);
      }
    }
    if (frame === null) {
      encodedBytes = doneBytes + text.length * 2;
      return done + text;
    }
    if (frame.index < frame.length) {
      const index = frame.index++;
      if (frame.array) {
        if (index > 0) text += ',';
        key = '' + index;
        value = frame.value[index];
      } else {
        key = frame.keys[index];
        value = frame.value[key];
        // A member whose value is undefined reads the same absent: it is left out, as JSON does.
        if (value === undefined) continue;
        if (frame.members++ > 0) text += ',';
        text += stringify(key) + ':';
      }
      pendingValue = true;
    } else {
      text += frame.array ? ']' : '}';
      frame = frame.parent;
      depth--;
    }
  }
}

// Observes a native promise the bootstrap made (or isolated-vm gave it) without consulting
// anything user code can redefine: see the file comment.
function observe(promise, onValue, onError) {
  ObjectDefineProperty(promise, 'constructor', { __proto__: null, value: undefined });
  const next = ReflectApply(PromiseThen, promise, [onValue, onError]);
  ObjectDefineProperty(next, 'constructor', { __proto__: null, value: undefined });
  return next;
}

// UTF-16 length is a lower bound of UTF-8 bytes: the isolate drops what is surely too big
// before it crosses; the worker and the host count exact bytes and enforce the cap.
function send(source, level, message, dataJson) {
  if (limits === null) return;
  const size = message.length + (dataJson === undefined ? 0 : dataJson.length);
  if (statusEvents >= limits.maxStatusEvents || statusUnits + size > limits.maxStatusBytes) {
    dropped++;
    return;
  }
  statusEvents++;
  statusUnits += size;
  if (dataJson === undefined) emitStatus(source, level, message);
  else emitStatus(source, level, message, dataJson);
}

function consoleMethod(level) {
  return function (...args) {
    if (limits === null || consoleCalls >= limits.maxConsoleCalls) {
      dropped++;
      return;
    }
    consoleCalls++;
    let text = '';
    for (let index = 0; index < args.length; index++) {
      text += (index === 0 ? '' : ' ') + toText(args[index]);
      if (text.length > limits.maxStatusBytes) break;
    }
    send('console', level, text, undefined);
  };
}

function reportStatus(message, data) {
  if (limits === null) return;
  const text = toText(message);
  if (statusEvents >= limits.maxStatusEvents || statusUnits + text.length > limits.maxStatusBytes) {
    dropped++;
    return;
  }
  let dataJson;
  if (data !== undefined) {
    // Data that cannot cross faithfully, or that is bigger than what is left of the budget or
    // too deep for the host, is dropped (encoding stops as soon as it is over); the message
    // still goes out.
    const left = limits.maxStatusBytes - statusUnits - text.length;
    try {
      const encoded = encode(data, 'data', left, left + 1);
      if (typeof encoded === 'string') dataJson = encoded;
    } catch {}
  }
  send('reportStatus', 'info', text, dataJson);
}

// answer is [text], an array the data Reference's copy made, whose index 0 is its own. The text:
// '1' + json, '0' + message, or '2' + token for an answer big enough that
// the heap may have no room for it: the host checks the room read here against its size and hands
// the text over in the same synchronous call, so nothing runs between the check and the copy (it
// ends the execution with OOM instead when the answer cannot fit).
function answerOf(answer) {
  answers++;
  probeIdle();
  if (breached !== null) throw new ErrorCtor('Execution has ended');
  const crossed = answer[0];
  const text =
    typeof crossed === 'string' && crossed[0] === '2'
      ? takeAnswer(ReflectApply(stringSlice, crossed, [1]), heapRoom())
      : crossed;
  if (typeof text !== 'string' || breached !== null) throw new ErrorCtor('Execution has ended');
  // Answers are copied in by isolated-vm, outside user code: a run that holds more than memoryMb
  // once one arrived ends OOM here, even if it would drop what it holds before returning.
  if (finish !== null && heapPassed()) {
    finish(outcome('oom', ''));
    throw new ErrorCtor('Execution has ended');
  }
  const body = ReflectApply(stringSlice, text, [1]);
  if (text[0] !== '1') throw new ErrorCtor(body);
  dataUnits += body.length;
  if (dataUnits > limits.maxDataBytes) {
    breach('maxDataBytes', dataUnits, 'Data crossing the bridge exceeded maxDataBytes', 'dataProxy.request');
    throw new ErrorCtor('Execution has ended');
  }
  return parse(body);
}

// One call across the data Reference: dataProxy.request (tool undefined) or tools.NAME.
// label names the call in errors, name the value in paths (params.x, input.x).
function bridgeCall(value, label, name, tool) {
  if (breached !== null) return breached;
  // Call maxDataRequests + 1 ends the execution here, before it crosses: a loop of calls queued
  // millions on the worker's thread, whose memory passed its bound while the host's answer
  // waited behind them, and a caught refusal let user code return a result (attack reviews).
  const maxCalls = limits === null ? 0 : limits.maxDataRequests;
  if (dataCalls >= maxCalls) {
    return breach(
      'maxDataRequests',
      dataCalls + 1,
      label + ': more than maxDataRequests (' + maxCalls + ') data requests and tool calls',
      label,
    );
  }
  dataCalls++;
  const max = limits === null ? 0 : limits.maxRequestBytes;
  let args;
  if (tool !== undefined && value === undefined) args = ['', 0, '', tool];
  else {
    let encoded;
    try {
      encoded = encode(value === undefined ? null : value, name, max, limits === null ? 0 : limits.maxRequestValues);
    } catch {
      // A getter, proxy or toJSON of the value threw: a fresh error, made here, with no frame
      // or receiver of the bridge on its stack.
      const error = new TypeErrorCtor(label + ': ' + name + ' must be JSON-serializable');
      return ReflectApply(PromiseReject, PromiseCtor, [error]);
    }
    if (typeof encoded === 'string') {
      dataUnits += encoded.length;
      if (dataUnits > limits.maxDataBytes) {
        return breach('maxDataBytes', dataUnits, label + ': data crossing the bridge exceeded maxDataBytes', label);
      }
      args = [encoded, encoded.length, '', tool];
    } else if (encoded.reason === 'type') {
      const error = new TypeErrorCtor(
        label + ': ' + encoded.path + ': ' + encoded.what + ' cannot be sent as JSON',
      );
      return ReflectApply(PromiseReject, PromiseCtor, [error]);
    } else {
      // Over a bound: the value never crosses and the execution ends, naming the limit.
      const field =
        encoded.reason === 'size' ? 'maxRequestBytes' : encoded.reason === 'values' ? 'maxRequestValues' : 'depth';
      return breach(field, encoded.units, label + ': ' + name + ' over ' + field, label);
    }
  }
  // A string answer: resolving with an object would consult a then method user code planted.
  crossings++;
  return observe(ReflectApply(dataApply, dataRef, [undefined, args, applyOptions]), answerOf, undefined);
}

function request(params) {
  return bridgeCall(params, 'dataProxy.request', 'params', undefined);
}

// tools.NAME for every configured tool, on an object with no prototype, built before user code
// runs; each function calls only what the bootstrap captured.
const tools = { __proto__: null };
for (let index = 0; index < toolNames.length; index++) {
  const tool = toolNames[index];
  const label = 'tools.' + tool;
  const call = (input) => bridgeCall(input, label, 'input', tool);
  ObjectDefineProperty(call, 'name', { __proto__: null, value: tool });
  ObjectDefineProperty(tools, tool, { __proto__: null, value: call, enumerable: true });
}

// Timers of the current run: id -> { callback, args, ms, setAt, crossed, cleared }, on an object
// with no prototype. The host keeps its own count and deadline; a timer fires only while the
// run's execution lasts. Every timer the host knows of holds its place until the host answers
// for it, and the host hears of a timer only once the code that set it yields (a microtask): a
// crossing is a task on the host's thread, and clearTimeout(setTimeout(f, 0)) in a loop, or
// with an await null between, queued millions of them, which stalled that thread for a second
// (found by our attack review). A timer cleared before it crossed never crosses.
let timers = { __proto__: null };
let unsent = { __proto__: null };
let flushScheduled = false;
let timersPending = 0;
let lastTimerId = 0;
// Ends the current run with an outcome text (once), whoever reaches one first.
let finish = null;

function setTimeout(callback, delay, ...args) {
  if (typeof callback !== 'function') {
    throw new TypeErrorCtor('setTimeout: the callback must be a function (a string is not evaluated)');
  }
  // First: a valueOf of the delay is user code, which may set timers of its own.
  let ms = +delay;
  if (!(ms > 0)) ms = 0;
  const max = limits === null ? 0 : limits.maxTimers;
  if (!(timersPending < max)) {
    throw new RangeErrorCtor(
      'setTimeout: ' + timersPending + ' timers are pending, the most maxTimers (' + max +
        ') allows: clear one or wait for one before setting another',
    );
  }
  const id = ++lastTimerId;
  timers[id] = { __proto__: null, callback, args, ms, setAt: DateNow(), crossed: false, cleared: false };
  timersPending++;
  unsent[id] = true;
  if (!flushScheduled) {
    flushScheduled = true;
    observe(ReflectApply(PromiseResolve, PromiseCtor, [undefined]), flushTimers, undefined);
  }
  return id;
}

// Tells the host of the timers set since the last flush and still pending, due when they were
// asked to be (the time since they were set is taken off).
function flushTimers() {
  flushScheduled = false;
  const ids = ObjectKeys(unsent);
  unsent = { __proto__: null };
  for (let index = 0; index < ids.length; index++) {
    const id = +ids[index];
    const timer = timers[id];
    if (timer === undefined || timer.crossed) continue;
    timer.crossed = true;
    const left = timer.ms - (DateNow() - timer.setAt);
    observe(
      ReflectApply(timerApply, timerRef, [undefined, [id, left > 0 ? left : 0], applyOptions]),
      (text) => fire(id, text),
      (error) => {
        // isolated-vm settles the call with Promise.prototype.then: user code that replaced it
        // with one that throws gets that error, as a data request would, not a timer that
        // never fires.
        fire(id, '0');
        if (finish !== null) finish(errorOutcome(error));
      },
    );
  }
}

function clearTimeout(id) {
  if (typeof id !== 'number') return;
  const timer = timers[id];
  if (timer === undefined || timer.cleared) return;
  if (!timer.crossed) {
    delete timers[id];
    timersPending--;
    return;
  }
  // Its place is free once the host answers '0' for it.
  timer.cleared = true;
  clearTimer(id);
}

// The host says timer id is due ('1') or will never fire ('0': cleared, past the deadline, the
// execution over). A callback that throws ends the run with its error, as an uncaught
// exception ends a Node process.
function fire(id, text) {
  const timer = timers[id];
  if (timer === undefined) return;
  delete timers[id];
  timersPending--;
  probeIdle();
  if (text !== '1' || timer.cleared) return;
  try {
    ReflectApply(timer.callback, undefined, timer.args);
  } catch (error) {
    if (finish !== null) finish(errorOutcome(error));
  }
}

function describe(error) {
  let name = 'Error';
  let message = '';
  let stack = '';
  try {
    if (error !== null && (typeof error === 'object' || typeof error === 'function')) {
      const n = error.name;
      const m = error.message;
      const s = error.stack;
      if (typeof n === 'string') name = n;
      message = typeof m === 'string' ? m : toText(error);
      if (typeof s === 'string') stack = s;
    } else {
      name = 'Thrown';
      message = toText(error);
    }
  } catch {
    message = '[unprintable]';
  }
  return stringify({ __proto__: null, name: cap(name, 200), message: cap(message, 4096), stack: cap(stack, 8192) });
}

for (let index = 0; index < wasmModules.length; index++) {
  const entry = wasmModules[index];
  const compiled = new WebAssembly.Module(entry[1]);
  global[entry[0]] =
    entry[2] === null
      ? new WebAssembly.Instance(compiled, {}).exports
      : new FunctionCtor('wasmModule', 'WebAssembly', entry[2])(compiled, WebAssembly);
}

// A module that exports its memory hands user code that memory, and through its constructor
// WebAssembly.Memory (and, for a shared one, SharedArrayBuffer through its buffer's): new
// memories outside memoryMb (a helper's attack: 64 MiB each, and a growable SharedArrayBuffer,
// a result 5 of 5). Those links are cut, for tables and globals too; the binding files above
// already ran with the constructors.
delete WebAssembly.Memory.prototype.constructor;
delete WebAssembly.Table.prototype.constructor;
delete WebAssembly.Global.prototype.constructor;
delete SharedArrayBuffer.prototype.constructor;

// Memory that isolated-vm's memoryLimit does not count: WebAssembly memories, growable and
// resizable buffers. Shared memory is not needed by user code either.
delete global.WebAssembly;
delete global.SharedArrayBuffer;
delete ArrayBuffer.prototype.resize;
delete ArrayBuffer.prototype.transfer;

// A FinalizationRegistry callback is a task the garbage collector queues: code of the run that
// starts without an answer or a timer. A run that made a registry is never reported idle (see
// probeIdle; an attack on the idle report had one make the request its report said it never
// would). The constructor is replaced by one that notes the registry and builds the same object
// (subclasses included); the original is reachable from nowhere else.
const FinalizationRegistryCtor = FinalizationRegistry;
let finalizers = false;
const FinalizationRegistryNoted = function FinalizationRegistry(cleanup) {
  if (new.target === undefined) {
    throw new TypeErrorCtor("Constructor FinalizationRegistry requires 'new'");
  }
  finalizers = true;
  return ReflectConstruct(FinalizationRegistryCtor, [cleanup], new.target);
};
ObjectDefineProperty(FinalizationRegistryNoted, 'prototype', {
  __proto__: null,
  value: FinalizationRegistryCtor.prototype,
  writable: false,
});
ObjectDefineProperty(FinalizationRegistryCtor.prototype, 'constructor', {
  __proto__: null,
  value: FinalizationRegistryNoted,
});
ObjectDefineProperty(global, 'FinalizationRegistry', {
  __proto__: null,
  value: FinalizationRegistryNoted,
});

// OOM from a fact, not a message. V8 throws RangeError "Array buffer allocation failed" when
// isolated-vm's allocator refuses a buffer past memoryMb, but user code can throw the same text
// from anywhere (even from a valueOf or getter such a builtin calls). So each builtin that
// allocates a buffer is reached through a wrapper (constructors: a Proxy, also set as their
// prototype's constructor, so that species paths such as slice and map reach it too): when the
// builtin throws that message, the bootstrap asks the allocator itself for as many bytes as the
// call asked for, and only if it refuses the bootstrap too is the error marked. Only a marked
// error that ends the run is OOM (see errorOutcome); any other is the code's own.
const ReflectConstruct = Reflect.construct;
const ProxyCtor = Proxy;
const NumberCtor = Number;
const ArrayBufferCtor = ArrayBuffer;
const WeakSetAdd = WeakSet.prototype.add;
const refusals = new WeakSet();
const allocationFailed = 'Array buffer allocation failed';
const TypedArrayPrototype = ObjectGetPrototypeOf(Uint8Array.prototype);
const TypedArrayLength = ObjectGetOwnPropertyDescriptor(TypedArrayPrototype, 'length').get;
const TypedArrayByteLength = ObjectGetOwnPropertyDescriptor(TypedArrayPrototype, 'byteLength').get;

// Whether value, thrown or made by the bootstrap's own call, says the allocator refused.
function saysRefused(value) {
  if (value === null || typeof value !== 'object') return false;
  try {
    const message = ObjectGetOwnPropertyDescriptor(value, 'message');
    return message !== undefined && message.value === allocationFailed;
  } catch {
    return false;
  }
}

// Marks error when the allocator refuses the bootstrap bytes too (a number: the probe calls no
// user code, so what it throws is V8's). isolated-vm lets 64 bytes or less through (it
// terminates the isolate instead), so a probe that small proves nothing.
function noteRefusal(error, bytes) {
  if (!(bytes > 64) || !saysRefused(error)) return;
  try {
    new ArrayBufferCtor(bytes);
  } catch (probe) {
    if (saysRefused(probe)) ReflectApply(WeakSetAdd, refusals, [error]);
  }
}

// The bytes a length argument asks for, when it is a primitive (an object's valueOf is user
// code: its answer is not read twice).
function primitiveLength(value) {
  return typeof value === 'number' ? value : typeof value === 'string' ? NumberCtor(value) : 0;
}

// The bytes new TypedArray(source, ...) asks for, elements of size bytes each: a length, a typed
// array's (internal) length, an array's length; 0 (nothing proved) for other array-likes and
// iterables, whose length only user code knows. V8 copies an array's elements to a list of its
// own before it allocates the buffer (8 bytes per element), garbage once the call threw: the
// probe asks for them too, or a refusal that the list tipped over would not be seen.
function typedArrayBytes(size, args) {
  const source = args[0];
  if (source === null || (typeof source !== 'object' && typeof source !== 'function')) {
    return primitiveLength(source) * size;
  }
  try {
    return ReflectApply(TypedArrayLength, source, []) * size;
  } catch {}
  try {
    return ArrayIsArray(source) ? source.length * (size + 8) : 0;
  } catch {
    return 0;
  }
}

// argumentsOf (optional) gives the arguments the builtin gets, or throws to refuse the call.
function wrapConstructor(name, bytesOf, argumentsOf) {
  const target = global[name];
  const proxy = new ProxyCtor(target, {
    __proto__: null,
    construct(_, args, newTarget) {
      const passed = argumentsOf === undefined ? args : argumentsOf(args);
      try {
        return ReflectConstruct(target, passed, newTarget === proxy ? target : newTarget);
      } catch (error) {
        noteRefusal(error, bytesOf(args));
        throw error;
      }
    },
  });
  global[name] = proxy;
  ObjectDefineProperty(target.prototype, 'constructor', {
    __proto__: null, value: proxy, writable: true, enumerable: false, configurable: true,
  });
}

function wrapMethod(holder, name, bytesOf) {
  const target = holder[name];
  if (typeof target !== 'function') return;
  holder[name] = new ProxyCtor(target, {
    __proto__: null,
    apply(_, self, args) {
      try {
        return ReflectApply(target, self, args);
      } catch (error) {
        noteRefusal(error, bytesOf(self, args));
        throw error;
      }
    },
  });
}

function byteLengthOf(self) {
  try {
    return ReflectApply(TypedArrayByteLength, self, []);
  } catch {
    return 0;
  }
}

// A resizable ArrayBuffer commits its pages as it grows, outside isolated-vm's allocator, so
// neither memoryMb nor the heap check counts them (a helper's attack: a 32 MiB run held 256 MiB
// of them and returned its result). Options asking for one (a maxByteLength, read once, as the
// builtin reads it) are refused, and the builtin gets the length alone; this Proxy is the only
// way to the native constructor (resize is deleted above). args is read by its own length, so
// an index planted on Array.prototype changes nothing.
function fixedLengthArguments(args) {
  const options = args.length > 1 ? args[1] : undefined;
  if (
    ((typeof options === 'object' && options !== null) || typeof options === 'function') &&
    options.maxByteLength !== undefined
  ) {
    throw new TypeErrorCtor('resizable ArrayBuffers are not available in the sandbox (their memory is outside memoryMb)');
  }
  return [args.length > 0 ? args[0] : undefined];
}

wrapConstructor('ArrayBuffer', (args) => primitiveLength(args[0]), fixedLengthArguments);
const typedArrays = [
  'Int8Array', 'Uint8Array', 'Uint8ClampedArray', 'Int16Array', 'Uint16Array', 'Int32Array',
  'Uint32Array', 'Float16Array', 'Float32Array', 'Float64Array', 'BigInt64Array', 'BigUint64Array',
];
for (let index = 0; index < typedArrays.length; index++) {
  const name = typedArrays[index];
  const ctor = global[name];
  if (typeof ctor !== 'function') continue;
  const size = ctor.BYTES_PER_ELEMENT;
  wrapConstructor(name, (args) => typedArrayBytes(size, args));
}
// Copies made with the intrinsic constructor, whatever constructor says.
wrapMethod(TypedArrayPrototype, 'toReversed', byteLengthOf);
wrapMethod(TypedArrayPrototype, 'toSorted', byteLengthOf);
wrapMethod(TypedArrayPrototype, 'with', byteLengthOf);
wrapMethod(ArrayBufferCtor.prototype, 'transferToFixedLength', (self, args) => {
  if (args.length > 0 && args[0] !== undefined) return primitiveLength(args[0]);
  try {
    return ReflectApply(ArrayBufferByteLength, self, []);
  } catch {
    return 0;
  }
});

global.dataProxy = ObjectFreeze({ request });
global.tools = ObjectFreeze(tools);
global.reportStatus = reportStatus;
global.setTimeout = setTimeout;
global.clearTimeout = clearTimeout;
global.console = ObjectFreeze({
  log: consoleMethod('info'),
  info: consoleMethod('info'),
  warn: consoleMethod('warn'),
  error: consoleMethod('error'),
});

// The outcome text of kind with body, as the file comment says; dropped is read last, so it
// counts what encoding the body did; the heap is the figure of the last check (heapPassed).
function outcome(kind, body) {
  return kind + '\n' + dropped + '\n' + heapInUse + '\n' + body;
}

// The outcome of kind with a body the bootstrap made by running user code (toJSON, getters, a
// thrown value's message): code that grew what the run holds past memoryMb while it ran is OOM,
// as if it had held it before (a helper's attack: 30 MiB kept and 3 MiB added by a toJSON gave a
// result). The body itself is the sandbox's: its bytes (bodyBytes; 2 a unit, the most a string
// takes, when not known) and 128 KiB for the rope nodes left of its building (two a chunk, and
// under encoderChunkUnits in the last one, about 24 bytes each) are not counted.
function checkedOutcome(kind, body, bodyBytes = body.length * 2) {
  return heapPassed(bodyBytes + 131072) ? outcome('oom', '') : outcome(kind, body);
}

// The outcome text of a value user code returned. Never throws. A run that holds more than
// memoryMb as it ends passed its limit, whatever it was about to deliver (oom); checked before
// the encoder runs, whose copy of the result (at most maxResultBytes) is the sandbox's, not the
// run's (counted after it, 29 MiB kept and a 1.5 MB string returned ended OOM under 32).
// Primitives, the common case of a trivial execution, skip the encoder (whose first call in an
// isolate compiles it).
function valueOutcome(value) {
  if (heapPassed()) return outcome('oom', '');
  const type = typeof value;
  if (value === undefined || value === null) return outcome('ok', 'null');
  if (type === 'boolean') return outcome('ok', value ? 'true' : 'false');
  if (type === 'number' && NumberIsFinite(value)) return outcome('ok', '' + value);
  if (type === 'string' && value.length <= limits.maxResultBytes) {
    const json = stringify(value);
    if (json.length > limits.maxResultBytes) return outcome('too-big', '' + json.length);
    return outcome('ok', json);
  }
  let encoded;
  try {
    encoded = encode(value, 'result', limits.maxResultBytes, limits.maxResultBytes + 1);
  } catch (error) {
    return checkedOutcome('unserializable', describe(error));
  }
  if (typeof encoded === 'string') return checkedOutcome('ok', encoded, encodedBytes);
  if (encoded.reason === 'size') return checkedOutcome('too-big', '' + encoded.units);
  if (encoded.reason === 'depth') return checkedOutcome('too-deep', '');
  return checkedOutcome('unsupported', stringify({ __proto__: null, path: encoded.path, what: encoded.what }));
}

// An error ends the run with OOM when the run holds more than memoryMb (heapPassed) or when the
// bootstrap saw the allocator refuse it (above); any other is the code's own.
function errorOutcome(error) {
  if (heapPassed() || ReflectApply(WeakSetHas, refusals, [error])) return outcome('oom', '');
  return checkedOutcome('throw', describe(error));
}

// A run asked to (a second run checked against its journal, replay-journal.ts) tells the host
// when it waits for nothing but answers: no code of its runs and no timer is pending, so without
// another answer it does nothing again (a run that made a FinalizationRegistry never reports: its
// callbacks are tasks of their own). After anything that lets it run (its start, an
// answer, a timer) it makes a probe: a call to the host that answers at once. isolated-vm queues
// the probe's answer behind every task queued before it, and the reaction below runs after the
// microtasks of all of them: a point where nothing of the run's is in progress. The counts let
// the host tell whether an answer was still on its way then (it discards the report if so).
// The probe's answer is a plain string, not a promise (no result.promise): isolated-vm resolves
// with a promise by looking up its then, which user code may have replaced, and would see (or
// swallow) every probe (found by an attack on this report, stop 40).
const probeOptions = { __proto__: null, result: { __proto__: null, copy: true } };
let probing = false;
let probeInFlight = false;

function probeIdle() {
  if (!probing || probeInFlight) return;
  probeInFlight = true;
  observe(ReflectApply(probeApply, probeRef, [undefined, [], probeOptions]), probed, probed);
}

function probed() {
  probeInFlight = false;
  if (probing && timersPending === 0 && !finalizers) reportIdle(crossings, answers);
}

let pending = null;
return [
  function run(code, limitsJson, synchronous, reportsIdle) {
    limits = parse(limitsJson);
    dataCalls = 0;
    crossings = 0;
    answers = 0;
    probing = false;
    finalizers = false;
    dataUnits = 0;
    breached = null;
    timers = { __proto__: null };
    unsent = { __proto__: null };
    timersPending = 0;
    const report = synchronous ? deliverNow : deliver;
    let fn;
    try {
      fn = new AsyncFunction(code);
    } catch (error) {
      report(outcome('syntax', describe(error)));
      pending = null;
      throw runEnded;
    }
    // The run's promise settles with the first outcome: user code's own, or a timer callback's
    // throw while user code still waits. It is made here, with the captured constructor, and
    // resolves with undefined, so nothing looks up a then.
    let settle = null;
    pending = new PromiseCtor((resolve) => {
      settle = resolve;
    });
    ObjectDefineProperty(pending, 'constructor', { __proto__: null, value: undefined });
    let done = false;
    finish = (text) => {
      if (done) return;
      done = true;
      probing = false;
      report(text);
      settle();
    };
    // Calling an async function never throws; its promise is one only this closure holds.
    observe(
      ReflectApply(fn, undefined, []),
      (value) => finish(valueOutcome(value)),
      (error) => finish(errorOutcome(error)),
    );
    if (reportsIdle === true && !done) {
      probing = true;
      probeIdle();
    }
    // Never a return: see the file comment. User code's microtasks still run after this, in the
    // same timed call.
    throw runEnded;
  },
];
`;
