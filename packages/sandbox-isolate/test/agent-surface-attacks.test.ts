// Attacks on the agent-facing surface (named tools, TypeScript input, timers, error locations),
// from published escape and crash catalogues (vm2's advisories, isolated-vm's crash issues,
// secure-exec's attack vectors) and from what the new parts invite. Real isolates, in worker
// processes and in-process; each row of docs/security.md's table of published escapes that names
// this file is one of these tests.
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { SandboxValidationError } from '@coda/sandbox-core';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { type DataRequestInfo, SandboxEngine } from '../src/index.ts';
import { toolsFromMcpClient } from '../src/mcp/index.ts';
import { expectError, expectResult } from './helpers.ts';

const breaksTheStripper = [
  `return ${'('.repeat(5_000)}1${')'.repeat(5_000)}`,
  `return ${'!'.repeat(20_000)}1`,
  `${'a: '.repeat(20_000)};`,
  `return ${'typeof '.repeat(20_000)}1`,
  // Not nested: a syntax error on a 90 KB line makes the stripper's diagnostics trap.
  `${'let a: number = 1;'.repeat(5_000)} enum X { A }`,
];
const stripperRefusal =
  "SyntaxError: TypeScript could not be stripped: Node's type stripper failed on it (code nested too deeply, or a syntax error on a very long line)";

describe.each(['process', 'in-process'] as const)('TypeScript input, %s mode', (isolation) => {
  const engine = new SandboxEngine({ isolation, workers: 1, poolSize: 1 });
  afterAll(() => engine.dispose());

  it('refuses what breaks the stripper (deep nesting, an error on a long line); the next TypeScript still runs', async () => {
    // Before the fix, each of these broke Node's type stripper for good in its process (every
    // later TypeScript execution failed with "memory access out of bounds").
    for (const code of breaksTheStripper) {
      const event = expectError(await engine.run({ code, language: 'typescript' }), 'RUNTIME');
      expect(event.message).toBe(stripperRefusal);
      const next = await engine.run({
        code: 'const a: number = 2; return a',
        language: 'typescript',
      });
      expect(expectResult(next).payload).toBe(2);
    }
  });

  it('serves TypeScript submitted alongside the snippet that breaks the stripper', async () => {
    const runs = await Promise.all([
      engine.run({ code: breaksTheStripper[0] ?? '', language: 'typescript' }),
      engine.run({ code: 'const a: string = "x"; return a', language: 'typescript' }),
    ]);
    expect(expectError(runs[0]!, 'RUNTIME').message).toBe(stripperRefusal);
    expect(expectResult(runs[1]!).payload).toBe('x');
  });

  // Node's stripper takes about 2× longer per level of this nesting: 22 levels (130 bytes) took
  // 4.5–5.3 s, 30 would take hours. Found by an attack review: nothing bounded a strip, so the
  // snippet outlived its timeoutMs (in-process: RUNTIME after 22 s under 1 s; process: its worker
  // killed at the host's backstop) and every TypeScript execution waited behind it.
  const slowToStrip = `return ${'(<T>('.repeat(30)}1${'))'.repeat(30)};`;
  const stripTimeout = 'Execution timed out after 1000 ms (stripping its TypeScript types)';

  it('ends TypeScript that takes the stripper exponential time with TIMEOUT at its timeoutMs', async () => {
    const started = performance.now();
    const event = await engine.run({
      code: slowToStrip,
      language: 'typescript',
      limits: { timeoutMs: 1000 },
    });
    expect(expectError(event, 'TIMEOUT').message).toBe(stripTimeout);
    // Generous for a loaded machine; the worker was not killed (that message would say so).
    expect(performance.now() - started).toBeLessThan(2_500);
    const next = await engine.run({
      code: 'const a: number = 4; return a',
      language: 'typescript',
    });
    expect(expectResult(next).payload).toBe(4);
  });

  it("runs small TypeScript at a short timeoutMs even when each strip starts a thread: starting one is not the input's time", async () => {
    // Found by a review of the bound: a fresh thread (40–50 ms to load the stripper) was
    // counted, and small TypeScript ended TIMEOUT at timeoutMs 30 alone, 100 eight at once.
    const fresh = new SandboxEngine({ isolation, workers: 1, maxConcurrent: 8 });
    try {
      const code = 'const a: number = 1; return a';
      const first = await fresh.run({ code, language: 'typescript', limits: { timeoutMs: 30 } });
      const eight = await Promise.all(
        Array.from({ length: 8 }, () =>
          fresh.run({ code, language: 'typescript', limits: { timeoutMs: 100 } }),
        ),
      );
      expect([first, ...eight].map((event) => expectResult(event).payload)).toEqual(
        Array(9).fill(1),
      );
    } finally {
      await fresh.dispose();
    }
  });

  it('serves TypeScript submitted beside a slow strip before the slow one ends', async () => {
    const order: string[] = [];
    const slow = engine
      .run({ code: slowToStrip, language: 'typescript', limits: { timeoutMs: 1000 } })
      .then((event) => {
        order.push('slow');
        return event;
      });
    const quick = engine
      .run({ code: 'const a: string = "y"; return a', language: 'typescript' })
      .then((event) => {
        order.push('quick');
        return event;
      });
    const [slowEvent, quickEvent] = await Promise.all([slow, quick]);
    expect(expectError(slowEvent, 'TIMEOUT').message).toBe(stripTimeout);
    expect(expectResult(quickEvent).payload).toBe('y');
    expect(order).toEqual(['quick', 'slow']);
  });

  it('a cancelled execution stops its strip: the next TypeScript runs at once', async () => {
    const handle = engine.submit({ code: slowToStrip, language: 'typescript' });
    await new Promise((resolve) => setTimeout(resolve, 200));
    handle.cancel('enough');
    expectError(await handle.result, 'CANCELLED');
    const started = performance.now();
    const next = await engine.run({
      code: 'const a: number = 5; return a',
      language: 'typescript',
    });
    expect(expectResult(next).payload).toBe(5);
    expect(performance.now() - started).toBeLessThan(1_500);
  });

  it('never runs TypeScript that closes the function it is the body of', async () => {
    const event = expectError(
      await engine.run({
        code: 'return 1 as number\n}); globalThis.escaped = 1; (async function () {\nreturn 2',
        language: 'typescript',
      }),
      'RUNTIME',
    );
    expect(event.message).toBe('SyntaxError: Single function literal required');
    expect(expectResult(await engine.run({ code: 'return typeof escaped' })).payload).toBe(
      'undefined',
    );
  });
});

describe('timers cannot flood the thread that serves the isolate', () => {
  it('keeps the host event loop free during a synchronous set/clear storm (in-process)', async () => {
    const engine = new SandboxEngine({ isolation: 'in-process', poolSize: 1 });
    try {
      await engine.ready();
      const delay = monitorEventLoopDelay({ resolution: 5 });
      delay.enable();
      const event = await engine.run({
        code: 'for (;;) clearTimeout(setTimeout(() => {}, 0))',
        limits: { timeoutMs: 1_000 },
      });
      delay.disable();
      expectError(event, 'TIMEOUT');
      // Before the fix: every pair crossed to the host thread; the queue held it about 1 s.
      expect(delay.max / 1e6).toBeLessThan(250);
    } finally {
      await engine.dispose();
    }
  });

  it('serves a co-tenant on the same worker during the storm (process mode)', async () => {
    const engine = new SandboxEngine({ workers: 1, maxConcurrent: 2 });
    try {
      await engine.ready();
      const storm = engine.run({
        code: 'for (;;) clearTimeout(setTimeout(() => {}, 0))',
        limits: { timeoutMs: 1_000 },
      });
      await new Promise((resolve) => setTimeout(resolve, 300));
      const started = performance.now();
      const coTenant = await engine.run({ code: 'return 1' });
      const waitedMs = performance.now() - started;
      expect(expectResult(coTenant).payload).toBe(1);
      expectError(await storm, 'TIMEOUT');
      // Before the fix the co-tenant waited out the whole storm (1.2 s measured).
      expect(waitedMs).toBeLessThan(500);
    } finally {
      await engine.dispose();
    }
  });

  const engine = new SandboxEngine({ workers: 1 });
  afterAll(() => engine.dispose());
  const payloadOf = async (code: string) => expectResult(await engine.run({ code })).payload;

  it('lets a timer cleared before the code yields go without crossing (a debounce of 5 000)', async () => {
    const code = `let t; let fired = 0;
      for (let i = 0; i < 5000; i++) { clearTimeout(t); t = setTimeout(() => { fired++; }, 5); }
      await new Promise((r) => setTimeout(r, 30));
      return fired`;
    expect(await payloadOf(code)).toBe(1);
  });

  it('holds a crossed timer’s place until the host confirms its clear: an await-null storm is refused', async () => {
    const code = `try {
        for (;;) { const id = setTimeout(() => {}, 1e6); await null; clearTimeout(id); }
      } catch (error) { return error.message; }`;
    expect(await payloadOf(code)).toBe(
      'setTimeout: 100 timers are pending, the most maxTimers (100) allows: clear one or wait for one before setting another',
    );
  });

  it('cannot clear the timers of another execution on the same worker', async () => {
    const waiting = engine.run({
      code: `let fired = 0; setTimeout(() => { fired++; }, 100);
        await new Promise((r) => setTimeout(r, 150)); return fired`,
    });
    const clearing = await engine.run({
      code: 'for (let id = 0; id < 1000; id++) clearTimeout(id); return "cleared"',
    });
    expect(expectResult(clearing).payload).toBe('cleared');
    expect(expectResult(await waiting).payload).toBe(1);
  });

  it('reads NaN, negative, string and valueOf delays as numbers; Infinity and 2 ** 53 are past the deadline and never fire', async () => {
    const code = `const o = [];
      setTimeout(() => o.push('nan'), NaN); setTimeout(() => o.push('neg'), -5);
      setTimeout(() => o.push('inf'), Infinity); setTimeout(() => o.push('big'), 2 ** 53);
      setTimeout(() => o.push('str'), '3'); setTimeout(() => o.push('obj'), { valueOf() { return 1; } });
      await new Promise((r) => setTimeout(r, 30));
      return o.sort()`;
    expect(await payloadOf(code)).toEqual(['nan', 'neg', 'obj', 'str']);
  });

  it('bounds timers a delay’s valueOf sets while setTimeout is still deciding', async () => {
    const code = `let n = 0;
      const d = { valueOf() { if (n++ < 1000) setTimeout(() => {}, d); return 1; } };
      try { setTimeout(() => {}, d); } catch (error) { return [n, error.message]; }`;
    expect(await payloadOf(code)).toEqual([
      1001,
      'setTimeout: 100 timers are pending, the most maxTimers (100) allows: clear one or wait for one before setting another',
    ]);
  });
});

describe('tools', () => {
  const received: unknown[] = [];
  let signalOfNever: AbortSignal | undefined;
  const engine = new SandboxEngine({
    workers: 1,
    tools: {
      echo: {
        handler: (input: unknown) => {
          received.push(input);
          return input;
        },
      },
      constructor: { handler: () => 'ctor' },
      hasOwnProperty: { handler: () => 'own' },
      toString: { handler: () => 'text' },
      never: {
        handler: (_input: unknown, info: DataRequestInfo) => {
          signalOfNever = info.signal;
          return new Promise(() => {});
        },
      },
      leaky: {
        handler: () => {
          throw new Error(`/srv/app/secrets/config.ts: ${'x'.repeat(1_000_000)}`);
        },
      },
    },
  });
  afterAll(() => engine.dispose());

  it('answers exactly after user code tampered with every prototype the bridge could consult', async () => {
    received.length = 0;
    const code = `
      const fail = (what) => ({ get() { throw new Error(what); }, set() { throw new Error(what); }, configurable: true });
      Object.defineProperty(Object.prototype, 'constructor', fail('constructor'));
      Object.defineProperty(Array.prototype, '0', fail('index 0'));
      Object.defineProperty(Array.prototype, 'length', { value: 0, writable: true });
      Object.defineProperty(Object.prototype, 'input', fail('input'));
      JSON.parse = () => { throw new Error('parse'); };
      JSON.stringify = () => { throw new Error('stringify'); };
      Reflect.apply = () => { throw new Error('apply'); };
      Object.keys = () => { throw new Error('keys'); };
      const answer = await tools.echo({ list: ['a'], n: 1 });
      delete Object.prototype.constructor; delete Object.prototype.input;
      return { list: answer.list.length, n: answer.n };`;
    expect(expectResult(await engine.run({ code })).payload).toEqual({ list: 1, n: 1 });
    expect(received).toEqual([{ list: ['a'], n: 1 }]);
  });

  it('gives a species constructor planted on Promise nothing of a tool’s answer', async () => {
    // isolated-vm resolves the promise of a call with a promise of its own, whose then looks up
    // Promise[Symbol.species]: user code runs there, but sees only undefined go by. (Once more
    // before issue 23, when the run's own promise went through isolated-vm's promise transfer.)
    const code = `const seen = [];
      class Spy extends Promise {
        constructor(executor) {
          seen.push('construct');
          super((resolve, reject) => executor((v) => { seen.push('resolve ' + typeof v); resolve(v); }, reject));
        }
      }
      Object.defineProperty(Promise, Symbol.species, { get() { seen.push('species'); return Spy; } });
      const answer = await tools.echo({ secret: 'host-answer' });
      return [answer, seen]`;
    expect(expectResult(await engine.run({ code })).payload).toEqual([
      { secret: 'host-answer' },
      ['species', 'construct', 'resolve undefined'],
    ]);
  });

  it('dispatches tools named like Object.prototype members, and no other name', async () => {
    const code = `return [await tools.constructor(), await tools.hasOwnProperty(), await tools.toString(),
      Object.getPrototypeOf(tools), typeof tools.valueOf, typeof tools.__proto__]`;
    expect(expectResult(await engine.run({ code })).payload).toEqual([
      'ctor',
      'own',
      'text',
      null,
      'undefined',
      'undefined',
    ]);
    const event = expectError(await engine.run({ code: 'await tools.nope()' }), 'RUNTIME');
    expect(event.message).toBe('TypeError: tools.nope is not a function');
  });

  it('refuses input nested past the depth limit before the host parses it', async () => {
    received.length = 0;
    const event = expectError(
      await engine.run({
        code: 'let v = 1; for (let i = 0; i < 3000; i++) v = [v]; return await tools.echo(v)',
      }),
      'VALIDATION',
    );
    expect(event.message).toBe('tools.echo input are nested deeper than 2000 levels');
    expect(received).toEqual([]);
  });

  it('cuts a handler’s huge error message and masks its host paths', async () => {
    const code = `try { await tools.leaky(); } catch (error) { return [error.message.length, error.message.slice(0, 14)]; }`;
    expect(expectResult(await engine.run({ code })).payload).toEqual([1_001, '<host>: xxxxxx']);
  });

  it('ends a run whose tool never answers when it is cancelled, and aborts the handler', async () => {
    const handle = engine.submit({ code: 'await tools.never()' });
    setTimeout(() => handle.cancel('stop'), 100);
    const events = [];
    for await (const event of handle) events.push(event);
    expect(events.at(-1)).toMatchObject({ type: 'error', code: 'CANCELLED', message: 'stop' });
    // The terminal event may go out a moment before the worker reports the run over.
    await vi.waitFor(() => expect(signalOfNever?.aborted).toBe(true));
  });

  it('ends a tool flood at maxDataRequests while a co-tenant on the same worker is served', async () => {
    const flood = engine.run({
      code: 'for (;;) { tools.echo(1).catch(() => {}); await null; }',
      limits: { maxDataRequests: 1_000 },
    });
    const coTenant = await engine.run({ code: 'return "served"' });
    expect(expectResult(coTenant).payload).toBe('served');
    const event = expectError(await flood, 'LIMIT_EXCEEDED');
    expect(event.details).toEqual({ field: 'maxDataRequests', limit: 1_000, size: 1_001 });
    // Before the fix the calls past the limit crossed too: the worker passed its 1 GiB bound
    // (OOM, and its co-tenants lost with it) while the host's answer waited behind them.
    expect(event.stats?.dataRequests).toBe(1_000);
  });

  it('lets no call past maxDataRequests cross, even from a synchronous loop', async () => {
    const event = expectError(
      await engine.run({ code: 'for (;;) dataProxy.request(1).catch(() => {})' }),
      'LIMIT_EXCEEDED',
    );
    expect(event.details).toEqual({ field: 'maxDataRequests', limit: 20, size: 21 });
    expect(event.stats?.dataRequests).toBe(20);
  });

  it('never reaches a handler from a timer due after the execution timed out', async () => {
    received.length = 0;
    const event = await engine.run({
      code: "setTimeout(() => tools.echo('late'), 150); await new Promise(() => {})",
      limits: { timeoutMs: 100 },
    });
    expectError(event, 'TIMEOUT');
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(received).toEqual([]);
  });

  // Variants of the maxDataRequests + 1 fix: one count for both kinds of call, whichever
  // callback makes them, and nothing crossing once the code has returned.
  it('counts tools and dataProxy.request interleaved in one loop against one limit', async () => {
    received.length = 0;
    const event = expectError(
      await engine.run({
        code: 'for (;;) { tools.echo(1).catch(() => {}); dataProxy.request(1).catch(() => {}) }',
      }),
      'LIMIT_EXCEEDED',
    );
    expect(event.details).toEqual({ field: 'maxDataRequests', limit: 20, size: 21 });
    expect(event.stats?.dataRequests).toBe(20);
    expect(received).toHaveLength(10); // calls 1, 3, … 19; the 21st ended the run
  });

  it('lets no call past the limit cross from fifty timer callbacks that each loop', async () => {
    received.length = 0;
    const event = expectError(
      await engine.run({
        code: 'for (let i = 0; i < 50; i++) setTimeout(() => { for (;;) tools.echo(1).catch(() => {}) }, 0); await new Promise(() => {})',
      }),
      'LIMIT_EXCEEDED',
    );
    expect(event.details).toEqual({ field: 'maxDataRequests', limit: 20, size: 21 });
    expect(event.stats?.dataRequests).toBe(20);
    expect(received).toHaveLength(20);
  });

  it('lets no call past the limit cross from a then planted on a tool call’s promise', async () => {
    const event = expectError(
      await engine.run({
        code: 'const p = tools.echo(1); p.then = () => { for (;;) dataProxy.request(2).catch(() => {}) }; return await p',
      }),
      'LIMIT_EXCEEDED',
    );
    expect(event.stats?.dataRequests).toBe(20);
  });

  it('never reaches a handler from a timer set before the code returned', async () => {
    received.length = 0;
    const event = await engine.run({ code: "setTimeout(() => tools.echo('after'), 0); return 1" });
    expect(expectResult(event).payload).toBe(1);
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(received).toEqual([]);
  });

  it('ends a microtask loop queued before the return at the time limit; a co-tenant is served', async () => {
    const spinning = engine.run({
      code: 'Promise.resolve().then(() => { for (;;) {} }); return 1',
      limits: { timeoutMs: 300 },
    });
    expect(expectError(await spinning, 'TIMEOUT').details).toEqual({ timeoutMs: 300 });
    expect(expectResult(await engine.run({ code: 'return "served"' })).payload).toBe('served');
  });
});

describe('error locations and stacks', () => {
  const engine = new SandboxEngine({ workers: 1, tools: { echo: { handler: (input) => input } } });
  afterAll(() => engine.dispose());

  it('gives Error.prepareStackTrace no function or receiver of a bootstrap frame', async () => {
    const code = `const seen = new Set();
      Error.prepareStackTrace = (error, frames) => {
        for (const f of frames) if (f.getFileName() === 'sandbox:bootstrap')
          seen.add(typeof f.getFunction() + ' ' + typeof f.getThis());
        return 'x';
      };
      const probe = { get a() { new Error().stack; return 1; } };
      await tools.echo(probe);
      await new Promise((r) => setTimeout(() => { new Error().stack; r(); }, 1));
      return [...seen]`;
    expect(expectResult(await engine.run({ code })).payload).toEqual(['undefined undefined']);
  });

  it('reads a thrown object whose getters throw as unprintable', async () => {
    const event = expectError(
      await engine.run({ code: "throw { get name() { throw new Error('n'); }, message: 'm' }" }),
      'RUNTIME',
    );
    expect(event.message).toBe('Error: [unprintable]');
    expect(event.details).toEqual({ name: 'Error', stack: '' });
  });

  it('caps a thrown value’s huge name, message and stack, host paths masked', async () => {
    const event = expectError(
      await engine.run({
        code: "throw { name: 'N'.repeat(1e5), message: '/home/user/secret/file.ts ' + 'm'.repeat(1e5), stack: 'S'.repeat(1e6) }",
      }),
      'RUNTIME',
    );
    expect(event.message).toBe(`${'N'.repeat(200)}: <host> ${'m'.repeat(4_096 - 26)}`);
    expect(event.details).toEqual({ name: 'N'.repeat(200), stack: 'S'.repeat(8_192) });
  });

  it('keeps a forged host frame out of the stack and a forged path out of the message', async () => {
    const code = [
      "const e = new Error('boom /opt/app/x.js');",
      "e.stack = 'Error: boom\\n    at f (/opt/app/secret.js:1:1)\\n    at eval (eval at run (sandbox:bootstrap:1:1), <anonymous>:3:1)';",
      'throw e;',
    ].join('\n');
    const event = expectError(await engine.run({ code }), 'RUNTIME');
    expect(event.message).toBe('Error: boom <host>');
    expect(event.details).toEqual({
      name: 'Error',
      stack: 'Error: boom\n    at <anonymous>:1:1',
      location: { line: 1, column: 1 },
      sourceLine: "const e = new Error('boom /opt/app/x.js');",
    });
  });
});

describe('an MCP server’s hostile tool listing', () => {
  const hostileServer = fileURLToPath(new URL('./support/mcp-hostile-server.ts', import.meta.url));
  const listed = async (names: string[]) => {
    const client = new Client({ name: 'attacks', version: '1.0.0' });
    await client.connect(
      new StdioClientTransport({
        command: process.execPath,
        args: [hostileServer],
        env: { HOSTILE_TOOL_NAMES: names.join(',') },
      }),
    );
    try {
      return await toolsFromMcpClient(client);
    } catch (error) {
      return error;
    } finally {
      await client.close();
    }
  };

  it('refuses a tool named __proto__ (it set the prototype of the result, the tool vanished)', async () => {
    const error = await listed(['ok', '__proto__']);
    expect(error).toBeInstanceOf(SandboxValidationError);
    expect((error as SandboxValidationError).message).toBe(
      'toolsFromMcpClient: tools.__proto__: is reserved',
    );
  });

  it('keeps tools named like Object.prototype members as own entries', async () => {
    const tools = (await listed(['constructor', 'hasOwnProperty'])) as Record<string, unknown>;
    expect(Object.keys(tools)).toEqual(['constructor', 'hasOwnProperty']);
    expect(Object.getPrototypeOf(tools)).toBe(Object.prototype);
  });
});

describe('telemetry cannot be inflated by user code', () => {
  it('keeps span attributes and status messages bounded, whatever user code throws or sends', async () => {
    const spans = new InMemorySpanExporter();
    const tracerProvider = new BasicTracerProvider({
      spanProcessors: [new SimpleSpanProcessor(spans)],
    });
    const engine = new SandboxEngine({
      isolation: 'in-process',
      poolSize: 1,
      telemetry: { tracerProvider },
      tools: {
        leaky: {
          handler: () => {
            throw new Error(`/srv/app/x.ts ${'e'.repeat(1_000_000)}`);
          },
        },
      },
    });
    try {
      const event = expectError(
        await engine.run({
          code: `try { await tools.leaky('i'.repeat(500000)); } catch {}
            const error = new Error('m'.repeat(1e6)); error.name = 'N'.repeat(1e6); throw error;`,
        }),
        'RUNTIME',
      );
      const finished = spans.getFinishedSpans();
      const texts = finished.flatMap((span) => [
        span.name,
        span.status.message ?? '',
        ...Object.values(span.attributes).map(String),
      ]);
      // Status messages are codes only (docs/isolate.md, "Observability"): the longest text is
      // an attribute or span name of the engine's own table.
      expect(Math.max(...texts.map((text) => text.length))).toBeLessThan(100);
      expect(event.message.length).toBe(200 + 2 + 4_096);
      expect(finished.filter((span) => span.status.message === 'RUNTIME')).toHaveLength(2);
      expect(texts.some((text) => text.includes('iiii') || text.includes('/srv/'))).toBe(false);
      expect(Math.max(...finished.map((span) => Object.keys(span.attributes).length))).toBeLessThan(
        40,
      );
    } finally {
      await engine.dispose();
      await tracerProvider.shutdown();
    }
  });
});
