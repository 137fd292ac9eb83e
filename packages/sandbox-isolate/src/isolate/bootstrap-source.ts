// The script that prepares every isolate's context before user code runs. It lives in the
// isolate, so it is a string: it must not depend on anything the host build pipeline could
// inject (coverage counters, helpers), and it must survive user code tampering with builtins.
//
// Arguments: $0 = status callback (sync ivm.Callback: source, level, message, dataJson?),
// $1 = data Reference (async host function: paramsJson | null, units, tooDeep → '1' + json |
// '0' + message), $2 = WASM modules as [name, bytes, bindingSource | null][], $3 = deliver
// callback (ivm.Callback, fire and forget: the run's outcome text), $4 = the nesting depth limit,
// $5 = the same delivery as a synchronous ivm.Callback.
// It captures them in this closure (they are never reachable from the global object) and
// returns `[run, settled]`, two functions whose References only the host holds.
//
// `run(code, limitsJson, synchronous)` starts user code and delivers its outcome as a string,
// never an object: resolving a promise with an object looks up its `then`, which user code could
// have planted on a prototype. The string is `kind\ndropped\nbody`, where kind is ok | too-big |
// unserializable | throw. Called with `synchronous` (through applySync, on the host's thread), it
// returns nothing and delivers through $5, a callback that blocks until the host has the outcome:
// an outcome reached before the call returns is with the host when it returns, and one reached
// later arrives from the isolate's thread; `settled()` returns the promise of the rest. Otherwise
// `run` returns that promise itself and delivers through $3.

/** Source of the isolate bootstrap; see the file comment for its contract. */
export const bootstrapSource = String.raw`'use strict';
const emitStatus = $0;
const dataRef = $1;
const wasmModules = $2;
const deliver = $3;
const maxDepth = $4;
const deliverNow = $5;
const global = globalThis;
const stringify = JSON.stringify;
const parse = JSON.parse;
const StringCtor = String;
const ErrorCtor = Error;
const TypeErrorCtor = TypeError;
const ReflectApply = Reflect.apply;
const FunctionCtor = Function;
const AsyncFunction = (async function () {}).constructor;
const stringSlice = String.prototype.slice;
const charCodeAt = String.prototype.charCodeAt;
const RangeErrorCtor = RangeError;
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

function cap(text, max) {
  return text.length > max ? ReflectApply(stringSlice, text, [0, max]) : text;
}

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

// Whether the JSON text nests arrays and objects deeper than maxDepth. Each level takes an
// opening and a closing bracket, so short text (every trivial result) is never scanned.
function tooDeep(json) {
  const length = json.length;
  if (length <= 2 * maxDepth) return false;
  let depth = 0;
  for (let index = 0; index < length; index++) {
    const code = ReflectApply(charCodeAt, json, [index]);
    if (code === 34) {
      // A string: skip to its closing quote, over escapes.
      for (index++; index < length; index++) {
        const inner = ReflectApply(charCodeAt, json, [index]);
        if (inner === 92) index++;
        else if (inner === 34) break;
      }
    } else if (code === 91 || code === 123) {
      if (++depth > maxDepth) return true;
    } else if (code === 93 || code === 125) {
      depth--;
    }
  }
  return false;
}
// JSON.stringify recurses: a value nested deeper than the isolate's stack fails with a RangeError.
function isStackOverflow(error) {
  try {
    return error instanceof RangeErrorCtor && error.message === 'Maximum call stack size exceeded';
  } catch {
    return false;
  }
}
// UTF-16 length is a lower bound of UTF-8 bytes: the isolate drops what is surely too big
// before it crosses; the host counts exact bytes and enforces the cap.
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
  let dataJson;
  if (data !== undefined) {
    try {
      dataJson = stringify(data);
    } catch {}
    // Too deep for the host to use: the message goes out, the data does not.
    if (dataJson !== undefined && tooDeep(dataJson)) dataJson = undefined;
  }
  send('reportStatus', 'info', toText(message), dataJson);
}

async function request(params) {
  let json;
  let deep = false;
  try {
    json = stringify(params === undefined ? null : params);
  } catch (error) {
    if (!isStackOverflow(error)) {
      throw new TypeErrorCtor('dataProxy.request: params must be JSON-serializable');
    }
    deep = true;
  }
  if (json === undefined) json = 'null';
  // Too deep: the host ends the execution (VALIDATION); the params never cross.
  if (deep || tooDeep(json)) deep = true;
  const max = limits === null ? 0 : limits.maxDataBytes;
  const args = deep ? [null, json.length, true] : json.length > max ? [null, json.length] : [json, json.length];
  // A string answer: resolving with an object would consult a then method user code planted.
  const answer = await dataRef.apply(undefined, args, applyOptions);
  const text = ReflectApply(stringSlice, answer, [1]);
  if (answer[0] === '1') return parse(text);
  throw new ErrorCtor(text);
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

// Memory that isolated-vm's memoryLimit does not count: WebAssembly memories, growable and
// resizable buffers. Shared memory is not needed by user code either.
delete global.WebAssembly;
delete global.SharedArrayBuffer;
delete ArrayBuffer.prototype.resize;
delete ArrayBuffer.prototype.transfer;

global.dataProxy = Object.freeze({ request });
global.reportStatus = reportStatus;
global.console = Object.freeze({
  log: consoleMethod('info'),
  info: consoleMethod('info'),
  warn: consoleMethod('warn'),
  error: consoleMethod('error'),
});

let pending = null;
return [
  function run(code, limitsJson, synchronous) {
    limits = parse(limitsJson);
    pending = settle(code, synchronous ? deliverNow : deliver);
    return synchronous ? undefined : pending;
  },
  function settled() {
    return pending;
  },
];
async function settle(code, report) {
  report(await outcome(code));
}
async function outcome(code) {
  let fn;
  try {
    fn = new AsyncFunction(code);
  } catch (error) {
    return 'throw\n' + dropped + '\n' + describe(error);
  }
  let value;
  try {
    value = await ReflectApply(fn, undefined, []);
  } catch (error) {
    return 'throw\n' + dropped + '\n' + describe(error);
  }
  let json;
  try {
    json = stringify(value);
  } catch (error) {
    if (isStackOverflow(error)) return 'too-deep\n' + dropped + '\n';
    return 'unserializable\n' + dropped + '\n' + describe(error);
  }
  if (json === undefined) json = 'null';
  if (json.length > limits.maxResultBytes) return 'too-big\n' + dropped + '\n' + json.length;
  if (tooDeep(json)) return 'too-deep\n' + dropped + '\n';
  return 'ok\n' + dropped + '\n' + json;
}
`;
