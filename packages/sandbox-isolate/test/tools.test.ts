// Named tools on real isolates, in both isolation modes: `await tools.NAME(input)` in user code,
// host-side input validation, the data-request limits, error masking, and the option's checks.
import {
  defaultExecutionLimits,
  type ExecutionContext,
  SandboxValidationError,
} from '@coda/sandbox-core';
import { afterAll, describe, expect, expectTypeOf, it } from 'vitest';
import { z } from 'zod';
import { ExecutionSession } from '../src/engine/execution-session.ts';
import { type DataRequestInfo, defineTool, SandboxEngine } from '../src/index.ts';
import { toolTable } from '../src/tools/tool-config.ts';
import { expectError, expectResult } from './helpers.ts';

describe('the tools option', () => {
  const refused = (tools: unknown) => {
    try {
      new SandboxEngine({ tools } as never);
    } catch (error) {
      expect(error).toBeInstanceOf(SandboxValidationError);
      return (error as SandboxValidationError).issues.map((issue) => [issue.path, issue.message]);
    }
    throw new Error('the engine accepted the tools');
  };

  it('names each bad tool name and field', () => {
    expect(
      refused({
        'get-orders': { handler: () => 1 },
        ok: { handler: 'no', input: { parse: () => 1 }, extra: 1 },
        __proto__x: { handler: () => 1, description: 'x'.repeat(10_001) },
      }),
    ).toEqual([
      ['tools.ok.input', 'expected a zod schema'],
      ['tools.ok.handler', 'expected a function'],
      ['tools.ok.extra', 'unknown option'],
      ['tools.__proto__x.description', 'Too big: expected string to have <=10000 characters'],
      ['tools.get-orders', 'expected a JavaScript identifier'],
    ]);
  });

  it('refuses a name longer than 64 characters and more than 256 tools', () => {
    expect(refused({ [`a${'b'.repeat(64)}`]: { handler: () => 1 } })).toEqual([
      [`tools.a${'b'.repeat(64)}`, 'is longer than 64 characters'],
    ]);
    const many = Object.fromEntries(
      Array.from({ length: 257 }, (_, i) => [`t${i}`, { handler: () => 1 }]),
    );
    expect(refused(many)).toEqual([['tools', 'at most 256 tools']]);
  });

  it('types a handler’s input from its schema with defineTool, unknown without', () => {
    // Checked by the compiler (pnpm typecheck); the engine is only built.
    const typed = defineTool({
      input: z.object({ region: z.enum(['EMEA', 'APAC']), limit: z.number().default(20) }),
      handler: (input, info) => {
        expectTypeOf(input).toEqualTypeOf<{ region: 'EMEA' | 'APAC'; limit: number }>();
        expectTypeOf(info).toEqualTypeOf<DataRequestInfo>();
        return input.limit;
      },
    });
    const engine = new SandboxEngine({
      isolation: 'in-process',
      poolSize: 0,
      tools: { typed, plain: { handler: (input) => expectTypeOf(input).toBeUnknown() } },
    });
    expect(engine.toolDeclarations()).toBe(
      [
        'declare const tools: {',
        '  typed(input: {',
        '    region: "EMEA" | "APAC";',
        '    /** @default 20 */',
        '    limit?: number;',
        '  }): Promise<unknown>;',
        '  plain(input?: unknown): Promise<unknown>;',
        '};',
      ].join('\n'),
    );
    return engine.dispose();
  });

  it('makes `tools` a reserved global for WASM modules', () => {
    expect(() => new SandboxEngine({ wasmModules: [{ name: 'tools', wasmPath: '/x' }] })).toThrow(
      'wasmModules.0.name: is a reserved global',
    );
  });
});

describe.each(['process', 'in-process'] as const)('tools (%s)', (isolation) => {
  const calls: { input: unknown; info: DataRequestInfo }[] = [];
  const engine = new SandboxEngine({
    isolation,
    dataHandler: (params) => ({ data: params }),
    tools: {
      getOrders: defineTool({
        description: 'Orders of one region.',
        input: z.object({ region: z.enum(['EMEA', 'APAC']), limit: z.number().int().default(10) }),
        handler: (input, info) => {
          calls.push({ input, info });
          return { region: input.region, limit: input.limit, orders: [1, 2] };
        },
      }),
      echo: { handler: (input) => ({ got: input ?? 'nothing' }) },
      notify: { handler: () => undefined },
      fail: {
        handler: () => {
          throw new Error('ENOENT: open /srv/app/secrets/orders.json');
        },
      },
      slow: {
        handler: (_input, info) =>
          new Promise((resolve) => info.signal.addEventListener('abort', () => resolve('late'))),
      },
    },
  });
  afterAll(() => engine.dispose());

  const run = (code: string, limits?: object) =>
    engine.run({ code, ...(limits === undefined ? {} : { limits }) });
  const payloadOf = async (code: string) => expectResult(await run(code)).payload;

  it('calls a tool with validated input and gives the handler the data-request info', async () => {
    calls.length = 0;
    const event = expectResult(
      await engine.run({
        code: `return await tools.getOrders({ region: 'EMEA' })`,
        context: { userId: 'u1' },
      }),
    );
    expect(event.payload).toEqual({ region: 'EMEA', limit: 10, orders: [1, 2] });
    expect(event.stats.dataRequests).toBe(1);
    expect(calls).toHaveLength(1);
    expect(calls[0]?.input).toEqual({ region: 'EMEA', limit: 10 });
    const info = calls[0]?.info as DataRequestInfo;
    expect(info.index).toBe(1);
    expect((info.context as ExecutionContext).userId).toBe('u1');
    expect(info.signal.aborted).toBe(true); // the execution has ended since
  });

  it('rejects inside the isolate with a message naming the bad field and value', async () => {
    calls.length = 0;
    const payload = await payloadOf(`
      try { await tools.getOrders({ region: 'MARS', limit: 2.5 }); return 'called'; }
      catch (error) { return [error.constructor === Error, error.message]; }`);
    expect(payload).toEqual([
      true,
      'Invalid tools.getOrders input: region: Invalid option: expected one of "EMEA"|"APAC" (got "MARS"); limit: Invalid input: expected int, received number (got 2.5)',
    ]);
    expect(calls).toHaveLength(0);
  });

  it('passes input as sent without a schema, and undefined when none is given', async () => {
    expect(await payloadOf(`return [await tools.echo({ a: [1] }), await tools.echo()]`)).toEqual([
      { got: { a: [1] } },
      { got: 'nothing' },
    ]);
  });

  it('resolves a tool that returns nothing with null', async () => {
    expect(await payloadOf(`return await tools.notify({ to: 'x' })`)).toBeNull();
  });

  it('sends a handler error as its message with host paths masked', async () => {
    expect(
      await payloadOf(`try { await tools.fail(); } catch (error) { return error.message; }`),
    ).toBe('ENOENT: open <host>');
  });

  it('refuses input JSON would change, naming its path, before it crosses', async () => {
    calls.length = 0;
    expect(
      await payloadOf(
        `try { await tools.getOrders({ region: 'EMEA', seen: new Map() }); } catch (error) { return error.message; }`,
      ),
    ).toBe('tools.getOrders: input.seen: a Map cannot be sent as JSON');
    expect(calls).toHaveLength(0);
  });

  it('counts tool calls and data requests together against maxDataRequests', async () => {
    const event = expectError(
      await run(
        `await dataProxy.request(1); await tools.echo(2); await tools.echo(3); return 'done'`,
        { maxDataRequests: 2 },
      ),
      'LIMIT_EXCEEDED',
    );
    expect(event.message).toBe(
      'tools.echo: more than maxDataRequests (2) data requests and tool calls',
    );
    expect(event.details).toEqual({ field: 'maxDataRequests', limit: 2, size: 3 });
  });

  it('applies maxRequestBytes, maxRequestValues and maxDataBytes to tool input', async () => {
    const bytes = expectError(
      await run(`await tools.echo('x'.repeat(2000)); return 1`, { maxRequestBytes: 1000 }),
      'LIMIT_EXCEEDED',
    );
    expect(bytes.details).toEqual({ field: 'maxRequestBytes', limit: 1000, size: 2002 });
    const values = expectError(
      await run(`await tools.echo([1, 2, 3, 4]); return 1`, { maxRequestValues: 3 }),
      'LIMIT_EXCEEDED',
    );
    expect(values.message).toBe('tools.echo input hold more than maxRequestValues (3) values');
    const data = expectError(
      await run(`await tools.echo('x'.repeat(600)); return 1`, { maxDataBytes: 1000 }),
      'LIMIT_EXCEEDED',
    );
    // 602 bytes of input, then 610 of answer ({"got":"xxx…"}): over 1000 on the answer.
    expect(data.details).toEqual({ field: 'maxDataBytes', limit: 1000, size: 1212 });
  });

  it('keeps dataProxy.request as it was beside the tools', async () => {
    expect(await payloadOf(`return await dataProxy.request({ q: 1 })`)).toEqual({
      data: { q: 1 },
    });
  });

  it('builds `tools` with no prototype, frozen, one function per tool', async () => {
    expect(
      await payloadOf(`return [Object.getPrototypeOf(tools), Object.isFrozen(tools),
        Object.keys(tools), tools.getOrders.name, typeof tools.missing]`),
    ).toEqual([
      null,
      true,
      ['getOrders', 'echo', 'notify', 'fail', 'slow'],
      'getOrders',
      'undefined',
    ]);
  });

  it('ends a pending tool call with the execution', async () => {
    const event = expectError(
      await run(`await tools.slow(); return 'never'`, { timeoutMs: 300 }),
      'TIMEOUT',
    );
    expect(event.stats?.dataRequests).toBe(1);
  });
});

describe('an engine without tools', () => {
  const engine = new SandboxEngine({ isolation: 'in-process' });
  afterAll(() => engine.dispose());

  it('has an empty frozen `tools` object', async () => {
    const event = await engine.run({ code: 'return [Object.keys(tools), Object.isFrozen(tools)]' });
    expect(expectResult(event).payload).toEqual([[], true]);
  });
});

describe('the host side of a tool call trusts nothing the worker sends', () => {
  const handled: unknown[] = [];
  const session = new ExecutionSession({
    limits: defaultExecutionLimits,
    context: { executionId: 'e1' },
    dataHandler: (params) => {
      handled.push(params);
      return 'data';
    },
    tools: toolTable({ known: { handler: (input) => ({ input: input ?? 'none' }) } }),
    emit: () => {},
  });
  afterAll(() => session.close());

  it('refuses a name that is not a configured tool, without echoing it, and counts the call', async () => {
    expect(await session.data('{}', 2, '', 'constructor')).toEqual({
      ok: false,
      message: 'tools: no such tool is configured',
    });
    expect(await session.data('{}', 2, '', 'x'.repeat(100_000))).toEqual({
      ok: false,
      message: 'tools: no such tool is configured',
    });
    expect(session.stats(undefined, 0).dataRequests).toBe(2);
    expect(handled).toEqual([]);
  });

  it("reads '' as no input only for a tool, never for dataProxy.request", async () => {
    expect(await session.data('', 0, '', 'known')).toEqual({
      ok: true,
      json: '{"input":"none"}',
    });
    expect(await session.data('', 0, '')).toEqual({
      ok: false,
      message: 'Unexpected end of JSON input',
    });
    expect(handled).toEqual([]);
  });
});
