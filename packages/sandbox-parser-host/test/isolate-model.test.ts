// processModel 'isolate': one confined child per host runs each call in a fresh isolated-vm
// isolate. Real isolates in a real child, under bubblewrap (the default) and without it. The
// expected answers are written out here; which child served a call is read from /proc (the
// isolate runner's pid among this process's descendants), so "the child survives" is observed,
// not inferred.
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import type { Readable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { IsolateServer } from '../src/host/isolate-server.ts';
import type { ParserHostOptions, ParserResult } from '../src/index.ts';
import { type ChildExit, toParserChild } from '../src/spawn/child.ts';
import { makeHost, thrown } from './helpers.ts';

const fixture = (name: string): string =>
  fileURLToPath(new URL(`./fixtures/isolate/${name}`, import.meta.url));
const module = fixture('parsers.mjs');
const mebibyte = 1024 * 1024;

/** Pids of isolate children among this process's descendants (bwrap's inner node included). */
function isolateChildren(): number[] {
  const found: number[] = [];
  const walk = (pid: number): void => {
    let children: number[] = [];
    try {
      children = readFileSync(`/proc/${pid}/task/${pid}/children`, 'latin1')
        .split(' ')
        .filter(Boolean)
        .map(Number);
    } catch {
      return;
    }
    for (const child of children) {
      const cmdline = readFileSync(`/proc/${child}/cmdline`, 'latin1').split('\0');
      if (
        cmdline[0] === process.execPath &&
        cmdline.some((arg) => arg.includes('isolate-runner'))
      ) {
        found.push(child);
      }
      walk(child);
    }
  };
  walk(process.pid);
  return found;
}

function isolateHost(options: Partial<ParserHostOptions> = {}) {
  return makeHost({ module, processModel: 'isolate', warmSpare: true, ...options });
}

/** The fields of a result the table checks (confinement is checked once, below). */
function outcome(result: ParserResult): Record<string, unknown> {
  const { confinement: _, durationMs: __, ...rest } = result;
  return rest;
}

describe.each([
  { mode: 'none', options: { confinement: 'none' } },
  { mode: 'default', options: {} },
] as const)('isolate model, confinement: $mode', ({ mode, options }) => {
  it('the failure table: each failure ends its call with its code, and the same child serves the next call', async () => {
    const host = isolateHost({ ...options, maxOutputBytes: 1024 });
    await host.warm();
    const [child] = isolateChildren();
    // parser, payload, call options, the result's fields apart from timing and confinement.
    const table: [string, unknown, object, Record<string, unknown>][] = [
      [
        'echo',
        { id: 1 },
        { kwargs: { unit: 'kPa' } },
        {
          ok: true,
          data: { payload: { id: 1 }, kwargs: { unit: 'kPa' } },
          exitCode: 0,
          timedOut: false,
          stderr: '',
        },
      ],
      [
        'throws',
        { id: 7 },
        {},
        { ok: false, code: 'RUNTIME', error: 'bad frame: 7', exitCode: 1, timedOut: false },
      ],
      [
        'rejects',
        null,
        {},
        { ok: false, code: 'RUNTIME', error: 'async parser failed', exitCode: 1, timedOut: false },
      ],
      [
        'neverSettles',
        null,
        {},
        {
          ok: false,
          code: 'RUNTIME',
          error: 'parser returned a promise that never settled',
          exitCode: 1,
          timedOut: false,
        },
      ],
      [
        'missing',
        null,
        {},
        { ok: false, code: 'VALIDATION', error: 'Unknown parser: missing', exitCode: 1 },
      ],
      [
        '__proto__',
        null,
        {},
        { ok: false, code: 'VALIDATION', error: 'Unknown parser: __proto__', exitCode: 1 },
      ],
      [
        'bigint',
        null,
        {},
        {
          ok: false,
          code: 'VALIDATION',
          error: 'parser result is not JSON: Do not know how to serialize a BigInt',
          exitCode: 1,
        },
      ],
      [
        'large',
        { length: 2000 },
        {},
        {
          ok: false,
          code: 'VALIDATION',
          error: 'parser result is 2002 bytes, over maxOutputBytes (1024)',
          exitCode: 1,
        },
      ],
      [
        'spin',
        null,
        { timeout: 400 },
        { ok: false, code: 'TIMEOUT', error: 'sandbox timeout', timedOut: true, exitCode: null },
      ],
      [
        'spinLater',
        null,
        { timeout: 400 },
        { ok: false, code: 'TIMEOUT', error: 'sandbox timeout', timedOut: true, exitCode: null },
      ],
      [
        'spin',
        null,
        { cpuSecs: 1, timeout: 5000 },
        { ok: false, code: 'TIMEOUT', error: 'CPU time limit exceeded (1 s)', exitCode: null },
      ],
      [
        'heapBomb',
        null,
        { memoryBytes: 64 * mebibyte },
        {
          ok: false,
          code: 'OOM',
          error: "memory limit exceeded: the isolate's heap limit (32 MiB)",
          exitCode: 1,
        },
      ],
      [
        'arrayBufferBomb',
        null,
        { memoryBytes: 64 * mebibyte },
        {
          ok: false,
          code: 'OOM',
          error:
            "memory limit exceeded: Array buffer allocation failed (the isolate's limit, 32 MiB)",
          exitCode: 1,
        },
      ],
      // WebAssembly memory is outside the isolate's limit: without WebAssembly removed, this
      // filled the child's cgroup and the child died with every call on it.
      [
        'wasmBomb',
        null,
        { memoryBytes: 64 * mebibyte },
        { ok: false, code: 'RUNTIME', error: 'WebAssembly is not defined', exitCode: 1 },
      ],
    ];
    for (const [parser, payload, callOptions, expected] of table) {
      const started = performance.now();
      const result = await host.runParser(parser, payload, callOptions);
      const elapsed = performance.now() - started;
      expect({ parser, ...outcome(result) }).toEqual({
        parser,
        stderr: '',
        timedOut: false,
        ...expected,
      });
      // A wall clock or CPU limit ends the call soon after it, not at the host's backstop.
      const bound = 'timeout' in callOptions ? Number(callOptions.timeout) + 1000 : 2000;
      expect({ parser, fast: elapsed < bound }).toEqual({ parser, fast: true });
      const next = await host.runParser('echo', { after: parser });
      expect({ parser, ...outcome(next) }).toEqual({
        parser,
        ok: true,
        data: { payload: { after: parser }, kwargs: {} },
        exitCode: 0,
        timedOut: false,
        stderr: '',
      });
      expect({ parser, children: isolateChildren() }).toEqual({ parser, children: [child] });
    }
    const last = await host.runParser('echo', null);
    expect(last.confinement).toMatchObject(
      mode === 'none'
        ? { sandbox: 'none', memory: 'rss-watchdog', runtime: 'node', permissionModel: true }
        : { sandbox: 'bubblewrap', memory: 'cgroup', runtime: 'node', permissionModel: true },
    );
  });

  it('the child killed mid-call: that call fails CRASH, and a replacement serves the next', async () => {
    const host = isolateHost(options);
    await host.warm();
    const [child] = isolateChildren();
    const running = host.runParser('spin', null, { timeout: 10_000 });
    await new Promise((resolve) => setTimeout(resolve, 200));
    process.kill(child as number, 'SIGKILL');
    const crashed = await running;
    expect(outcome(crashed)).toMatchObject({
      ok: false,
      code: 'CRASH',
      error: 'the isolate child was killed by SIGKILL with this call in flight',
      exitCode: null,
      signal: 'SIGKILL',
      timedOut: false,
    });
    const next = await host.runParser('echo', 'after the crash');
    expect(outcome(next)).toEqual({
      ok: true,
      data: { payload: 'after the crash', kwargs: {} },
      exitCode: 0,
      timedOut: false,
      stderr: '',
    });
    const replacement = isolateChildren();
    expect(replacement).toHaveLength(1);
    expect(replacement[0]).not.toBe(child);
  });
});

describe('isolate model: nothing passes between calls', () => {
  it('a global, a patched prototype and a patched JSON set by one call are absent in the next', async () => {
    const host = isolateHost();
    const before = await host.runParser('look', null);
    const polluted = await host.runParser('pollute', null);
    const after = await host.runParser('look', null);
    const clean = { leftBehind: null, polluted: null, stringify: '{"a":1}' };
    expect([before.data, polluted.data, after.data]).toEqual([clean, 'polluted', clean]);
    // Module state too: each call instantiates the module afresh.
    const counts = [];
    for (let call = 0; call < 3; call++) counts.push((await host.runParser('count', null)).data);
    expect(counts).toEqual([1, 1, 1]);
  });

  it('no Node APIs inside an isolate: process, require, fetch, Buffer, timers, import("node:fs")', async () => {
    const host = isolateHost();
    const result = await host.runParser('nodeApis', null);
    expect(outcome(result)).toEqual({
      ok: true,
      data: {
        process: 'undefined',
        require: 'undefined',
        fetch: 'undefined',
        Buffer: 'undefined',
        setTimeout: 'undefined',
        WebAssembly: 'undefined',
        importMeta: 'undefined',
        dynamicImport: 'refused: Not supported',
      },
      exitCode: 0,
      timedOut: false,
      stderr: '',
    });
  });

  it('8 calls at once, 24 in all, through a relative import: each answer carries its own payload', async () => {
    const host = isolateHost({ maxConcurrent: 8 });
    await host.warm();
    const results = await Promise.all(
      Array.from({ length: 24 }, (_, n) => host.runParser('scaled', { values: [n, n + 1] })),
    );
    expect(results.map((result) => [result.ok, result.data])).toEqual(
      Array.from({ length: 24 }, (_, n) => [true, [n * 10, (n + 1) * 10]]),
    );
    expect(isolateChildren()).toHaveLength(1);
  });

  it('a 4 MiB payload goes in and comes back whole', async () => {
    const host = isolateHost();
    const text = 'ü'.repeat(2 * mebibyte);
    const result = await host.runParser('echo', { text });
    expect(result.ok).toBe(true);
    expect((result.data as { payload: { text: string } }).payload.text === text).toBe(true);
  });

  it('a call that times out does not hold up the calls beside it', async () => {
    const host = isolateHost({ maxConcurrent: 4 });
    await host.warm();
    const spinning = host.runParser('spin', null, { timeout: 1000 });
    const started = performance.now();
    const quick = await Promise.all([1, 2, 3].map((n) => host.runParser('echo', n)));
    expect(performance.now() - started).toBeLessThan(700);
    expect(quick.map((result) => result.data)).toEqual(
      [1, 2, 3].map((n) => ({ payload: n, kwargs: {} })),
    );
    expect(await spinning).toMatchObject({ ok: false, code: 'TIMEOUT', timedOut: true });
  });
});

// A relative import inside the directory is followed: `scaled` (helpers/scale.mjs), above.
describe('isolate model: imports', () => {
  it('node:, package and outside imports: every call fails RUNTIME naming the specifier', async () => {
    const table: [string, string, string][] = [
      [
        'node-import.mjs',
        'read',
        "cannot load parser module: import of 'node:fs' (in node-import.mjs) is refused: processModel 'isolate' runs pure JavaScript without Node APIs or packages; only relative imports inside the module's directory are resolved",
      ],
      [
        'bare-import.mjs',
        'parse',
        "cannot load parser module: import of 'zod' (in bare-import.mjs) is refused: processModel 'isolate' runs pure JavaScript without Node APIs or packages; only relative imports inside the module's directory are resolved",
      ],
      [
        'escape/outside.mjs',
        'parse',
        "cannot load parser module: import of '../parsers.mjs' (in outside.mjs) is refused: it leads out of the module's directory",
      ],
    ];
    // The three hosts start at once: no timing bound here.
    const results = await Promise.all(
      table.map(async ([file, parser]) => {
        const host = isolateHost({ module: fixture(file) });
        const calls = [await host.runParser(parser, null), await host.runParser(parser, null)];
        return { file, calls: calls.map(outcome) };
      }),
    );
    expect(results).toEqual(
      table.map(([file, , error]) => {
        const failed = {
          ok: false,
          code: 'RUNTIME',
          error,
          exitCode: 1,
          timedOut: false,
          stderr: '',
        };
        return { file, calls: [failed, failed] };
      }),
    );
  });
});

describe('isolate model: options', () => {
  it.each([
    [
      { runtime: 'python' },
      'processModel',
      'Invalid parser host options: processModel: the isolate model needs runtime node',
    ],
    [{ spares: 2 }, 'spares', "processModel 'isolate' keeps one child per host"],
    [
      { network: { allow: ['example.com'] } },
      'network',
      "a network allowlist is not available with processModel 'isolate'",
    ],
  ] as const)('%o is refused, naming %s', (more, path, message) => {
    const error = thrown(() => isolateHost(more as Partial<ParserHostOptions>));
    expect(error.code).toBe('VALIDATION');
    expect(error.message).toContain(message);
    expect(error.issues.map((issue) => issue.path)).toContain(path);
  });

  it('a call asking for more memory than the host default is refused before it runs', async () => {
    const host = isolateHost({ limits: { memoryBytes: 64 * mebibyte } });
    expect(outcome(await host.runParser('echo', null, { memoryBytes: 128 * mebibyte }))).toEqual({
      ok: false,
      code: 'VALIDATION',
      error:
        "memoryBytes 134217728 is over the host's limits.memoryBytes (67108864), the most a call may ask for with processModel 'isolate'",
      exitCode: null,
      timedOut: false,
      stderr: '',
    });
  });
});

describe('isolate model: the host checks every answer of the child', () => {
  /** Runs one call through an IsolateServer whose child is `lying-child.mjs` in `mode`. */
  async function callLyingChild(mode: string): Promise<ParserResult> {
    const child = spawn(process.execPath, [fixture('lying-child.mjs'), mode], {
      stdio: ['pipe', 'pipe', 'pipe', 'pipe', 'pipe'],
    });
    const exited = new Promise<ChildExit>((resolve) => {
      child.once('exit', (exitCode, signal) => resolve({ exitCode, signal }));
    });
    const parserChild = toParserChild(child, {
      response: child.stdio[3] as Readable,
      control: child.stdio[4] as Readable,
      exited,
      confinement: {
        sandbox: 'none',
        memory: 'heap-only',
        cpu: 'none',
        runtime: 'node',
        permissionModel: false,
        auditHook: false,
      },
      kill: () => child.kill('SIGKILL'),
    });
    const server = new IsolateServer(parserChild, 1024 * mebibyte, {
      maxOutputBytes: 1024,
      maxStderrBytes: 1024,
    });
    const limits = { timeout: 5000, memoryBytes: 64 * mebibyte, cpuSecs: 5 };
    try {
      return await server.run(
        {
          body: Buffer.alloc(0),
          isolateParts: {
            envelope: JSON.stringify({ v: 1, parser: 'p', kwargs: {}, limits }),
            payloadJson: 'null',
          },
          limits,
          signal: undefined,
          closing: new AbortController().signal,
        },
        performance.now(),
      );
    } finally {
      server.retire();
      await exited;
    }
  }

  it.each([
    [
      'wrong-nonce',
      {
        code: 'CRASH',
        error:
          'the isolate child was killed by SIGKILL with this call in flight (the host killed it: it sent a frame of no call in flight)',
      },
    ],
    [
      'too-large',
      { code: 'VALIDATION', error: 'parser response is 307221 bytes, over maxOutputBytes (1024)' },
    ],
    ['not-json', { code: 'CRASH', error: 'child sent a bad response: the response is not JSON' }],
    [
      'wrong-shape',
      { code: 'CRASH', error: 'child sent a bad response: the response has the wrong shape' },
    ],
    [
      'deep',
      {
        code: 'CRASH',
        error: 'child sent a bad response: the response is nested deeper than 10000 levels',
      },
    ],
  ])('%s: refused', async (mode, expected) => {
    expect(await callLyingChild(mode)).toMatchObject({ ok: false, ...expected });
  });
});
