// Tier 2 and the bridge itself: what may cross between user code and the host, in what size,
// under which time limit, and what user code can reach through it.
import type { JsonValue } from '@coda/sandbox-core';
import { afterAll, describe, expect, it } from 'vitest';
import { type DataRequestInfo, SandboxEngine } from '../src/index.ts';
import { collect, expectError, expectHealthy, expectResult } from './helpers.ts';

const received: { params: JsonValue; info: DataRequestInfo }[] = [];

const engine = new SandboxEngine({
  limits: { timeoutMs: 1_000 },
  dataHandler: (params, info) => {
    received.push({ params, info });
    const request = params as { kind?: string; size?: number } | null;
    switch (request?.kind) {
      case 'blob':
        return 'x'.repeat(request.size ?? 0);
      case 'accents':
        return 'é'.repeat(1_000);
      case 'fail':
        throw new Error('ENOENT: no such file or directory, open /srv/app/secrets/config.json');
      case 'bigint':
        return 10n;
      default:
        return params;
    }
  },
});
afterAll(() => engine.dispose());

async function payloadOf(code: string, limits = {}): Promise<unknown> {
  return expectResult(await engine.run({ code, limits })).payload;
}

describe('data requests', () => {
  it('hand the handler the params, the execution context and a signal that aborts at the end', async () => {
    received.length = 0;
    const event = await engine.run({
      code: 'return [await dataProxy.request({ a: 1 }), await dataProxy.request([2])]',
      context: { executionId: 'exec-1', userId: 'u-1', conversationId: 'c-1', turnId: 't-1' },
    });
    expect(expectResult(event).payload).toEqual([{ a: 1 }, [2]]);
    expect(received.map(({ params, info }) => [params, info.index, info.context])).toEqual([
      [{ a: 1 }, 1, { executionId: 'exec-1', userId: 'u-1', conversationId: 'c-1', turnId: 't-1' }],
      [[2], 2, { executionId: 'exec-1', userId: 'u-1', conversationId: 'c-1', turnId: 't-1' }],
    ]);
    expect(received[0]?.info.signal.aborted).toBe(true);
  });

  it('count UTF-8 bytes of params and responses in maxDataBytes', async () => {
    const event = await engine.run({
      code: 'return (await dataProxy.request({ kind: "accents" })).length',
    });
    const result = expectResult(event);
    expect(result.payload).toBe(1_000);
    // params {"kind":"accents"} = 18 bytes, response "é…é" = 2 + 2 000 bytes
    expect(result.stats.dataBytes).toBe(18 + 2_002);
  });

  it('end the execution with LIMIT_EXCEEDED once cumulative data passes maxDataBytes', async () => {
    const event = expectError(
      await engine.run({
        code: 'for (let i = 0; i < 5; i++) await dataProxy.request({ kind: "blob", size: 1000000 }); return "all"',
        limits: { maxDataBytes: 2_500_000 },
      }),
      'LIMIT_EXCEEDED',
    );
    expect(event.details).toMatchObject({ field: 'maxDataBytes', limit: 2_500_000 });
    expect(event.stats?.dataRequests).toBe(3);
    await expectHealthy(engine);
  });

  it('end the execution even when user code catches the limit error', async () => {
    const event = await engine.run({
      code: `
        let caught = 0;
        for (let i = 0; i < 30; i++) { try { await dataProxy.request(i); } catch { caught++; } }
        return caught;`,
    });
    expect(expectError(event, 'LIMIT_EXCEEDED').details).toEqual({
      field: 'maxDataRequests',
      limit: 20,
      size: 21,
    });
  });

  it('refuse params over the data budget before they cross', async () => {
    received.length = 0;
    const event = await engine.run({
      code: 'await dataProxy.request("x".repeat(900_000)); await dataProxy.request("x".repeat(900_000)); return 1',
      limits: { maxDataBytes: 1_000_000 },
    });
    expect(expectError(event, 'LIMIT_EXCEEDED').details).toMatchObject({ field: 'maxDataBytes' });
    expect(received).toHaveLength(1);
  });

  it('refuse one request over maxRequestBytes or maxRequestValues before it crosses', async () => {
    received.length = 0;
    const big = await engine.run({
      code: 'await dataProxy.request("x".repeat(3_000_000)); return 1',
    });
    expect(expectError(big, 'LIMIT_EXCEEDED').details).toMatchObject({
      field: 'maxRequestBytes',
      limit: 1_048_576,
    });
    // The stall: 48 MB of params, under maxDataBytes, parsed on the host's event loop.
    const many = await engine.run({
      code: 'await dataProxy.request(new Array(16e6).fill({})); return 1',
      // Filling 16e6 elements alone took over the suite's 1 s on a loaded 2-core machine.
      limits: { timeoutMs: 10_000 },
    });
    expect(expectError(many, 'LIMIT_EXCEEDED').details).toMatchObject({
      field: 'maxRequestValues',
      limit: 100_000,
    });
    const wide = await engine.run({
      code: 'await dataProxy.request(new Array(200).fill(0)); return 1',
      limits: { maxRequestValues: 100 },
    });
    expect(expectError(wide, 'LIMIT_EXCEEDED').details).toMatchObject({
      field: 'maxRequestValues',
    });
    expect(received).toEqual([]);
  });

  it('pass a handler error to user code without host paths', async () => {
    const payload = (await payloadOf(`
      try { await dataProxy.request({ kind: 'fail' }); }
      catch (error) { return [error.message, error.stack]; }`)) as string[];
    expect(payload[0]).toBe('ENOENT: no such file or directory, open <host>');
    expect(payload.join('\n')).not.toMatch(/\/srv|file:|node_modules|\.ts:/);
  });

  it('reject a response that is not JSON', async () => {
    const event = await engine.run({ code: 'return await dataProxy.request({ kind: "bigint" })' });
    expect(expectError(event, 'RUNTIME').message).toBe(
      'Error: dataProxy.request: the data handler returned no JSON value',
    );
  });

  it('reject in user code when no handler is configured', async () => {
    const bare = new SandboxEngine({ isolation: 'in-process', poolSize: 0 });
    try {
      const event = await bare.run({ code: 'return await dataProxy.request(1)' });
      expect(expectError(event, 'RUNTIME').message).toBe(
        'Error: dataProxy.request: no data handler is configured',
      );
    } finally {
      await bare.dispose();
    }
  });
});

describe('prototype pollution', () => {
  it('drops __proto__ keys from results, params and status data', async () => {
    received.length = 0;
    const events = await collect(
      engine.submit({
        code: `
          const hostile = JSON.parse('{"__proto__": {"polluted": "yes"}, "kept": 1}');
          reportStatus('s', hostile);
          await dataProxy.request(hostile);
          return hostile;`,
      }),
    );
    const status = events[0] as { data: object };
    const result = expectResult(events.at(-1) as never);
    for (const value of [status.data, result.payload as object, received[0]?.params as object]) {
      expect(value).toEqual({ kept: 1 });
      expect(Object.hasOwn(value, '__proto__')).toBe(false);
      expect(Object.getPrototypeOf(value)).toBe(Object.prototype);
      expect({ ...value }).not.toHaveProperty('polluted');
    }
    expect(({} as { polluted?: unknown }).polluted).toBeUndefined();
  });
});

describe('the time limit covers everything user code can run', () => {
  it.each([
    ['a getter on the result', 'return { get x() { while (true) {} } }'],
    ['toJSON on the result', 'return { toJSON() { while (true) {} } }'],
    ['a proxy as the result', 'return new Proxy({}, { ownKeys() { while (true) {} } })'],
    ['a thenable result', 'return { then() { while (true) {} } }'],
    ['toJSON on request params', 'await dataProxy.request({ toJSON() { while (true) {} } })'],
    ['toJSON on a console argument', 'console.log({ toJSON() { while (true) {} } })'],
    ['a getter on status data', 'reportStatus("s", { get x() { while (true) {} } })'],
    [
      'promise callbacks',
      'await new Promise(() => { (function spin() { Promise.resolve().then(spin); })(); })',
    ],
  ])('%s ends with TIMEOUT', async (_name, code) => {
    expectError(await engine.run({ code }), 'TIMEOUT');
    await expectHealthy(engine);
  });
});

describe('status and console caps', () => {
  it('drop status messages past maxStatusBytes, counting UTF-8 bytes', async () => {
    const events = await collect(
      engine.submit({
        code: 'for (let i = 0; i < 10; i++) reportStatus("x".repeat(200000)); return 1',
      }),
    );
    expect(events.filter((event) => event.type === 'status')).toHaveLength(5);
    expect(expectResult(events.at(-1) as never).stats).toMatchObject({
      statusEvents: 5,
      statusBytes: 1_000_000,
      statusDropped: 5,
    });

    const accents = await collect(
      engine.submit({
        code: 'console.log("éééé"); console.log("éé"); console.log("a"); return 1',
        limits: { maxStatusBytes: 9 },
      }),
    );
    expect(
      accents
        .filter((event) => event.type === 'status')
        .map((event) => event.type === 'status' && event.message),
    ).toEqual(['éééé', 'a']);
  });

  it('keep a 100 MiB console message on the isolate side', async () => {
    const rss = process.memoryUsage.rss();
    const events = await collect(
      engine.submit({
        code: 'const big = "y".repeat(100 * 1024 * 1024); console.log(big); console.error(big, big); return 1',
        limits: { memoryMb: 512 },
      }),
    );
    expect(events.map((event) => event.type)).toEqual(['result']);
    expect(expectResult(events[0] as never).stats.statusDropped).toBe(2);
    expect(process.memoryUsage.rss() - rss).toBeLessThan(50 * 1024 * 1024);
  });

  it('map console methods to levels and count console calls against maxConsoleCalls', async () => {
    const events = await collect(
      engine.submit({
        code: 'console.log(1); console.warn("w"); console.error("e", { a: [1] }); console.info("dropped"); return 1',
        limits: { maxConsoleCalls: 3 },
      }),
    );
    expect(events.slice(0, 3)).toEqual([
      { type: 'status', source: 'console', level: 'info', message: '1' },
      { type: 'status', source: 'console', level: 'warn', message: 'w' },
      { type: 'status', source: 'console', level: 'error', message: 'e {"a":[1]}' },
    ]);
    expect(expectResult(events[3] as never).stats).toMatchObject({
      statusEvents: 3,
      statusDropped: 1,
    });
  });
});

describe('a narrow bridge', () => {
  it('exposes only dataProxy, reportStatus and console beyond the language builtins', async () => {
    const payload = (await payloadOf(`
      const names = Object.getOwnPropertyNames(globalThis);
      return {
        injected: ['dataProxy', 'reportStatus', 'console'].filter((name) => names.includes(name)),
        suspicious: names.filter((name) =>
          /^(\\$|__)|^(ivm|Reference|Callback|ExternalCopy|Isolate|Context|Script)$/i.test(name),
        ),
        proxyKeys: Object.keys(dataProxy),
        gone: [typeof WebAssembly, typeof SharedArrayBuffer, typeof ArrayBuffer.prototype.resize],
      };`)) as Record<string, unknown>;
    expect(payload).toEqual({
      injected: ['dataProxy', 'reportStatus', 'console'],
      suspicious: [],
      proxyKeys: ['request'],
      gone: ['undefined', 'undefined', 'undefined'],
    });
  });

  it('gives stack-trace hooks no bridge function or receiver', async () => {
    const payload = await payloadOf(`
      const seen = [];
      Error.prepareStackTrace = (error, frames) => {
        for (const frame of frames) {
          const fn = frame.getFunction();
          if (fn !== undefined) seen.push(fn.name || 'anonymous');
          const self = frame.getThis();
          if (self !== undefined && self !== globalThis) seen.push('this:' + typeof self);
        }
        return 'trace';
      };
      let caller = 'unset';
      const probe = { toJSON: function () { caller = arguments.callee.caller; throw new Error('probe'); } };
      try { await dataProxy.request(probe); } catch (error) { void error.stack; }
      try { console.log(probe); } catch {}
      try { reportStatus('s', probe); } catch {}
      return { seen, caller };`);
    expect(payload).toEqual({ seen: [], caller: null });
  });

  it('keeps tampered builtins from changing what crosses', async () => {
    const payload = await payloadOf(`
      JSON.stringify = () => '"forged"';
      JSON.parse = () => 'forged';
      Array.prototype.then = (resolve) => resolve('forged');
      Object.prototype.reference = true;
      const echoed = await dataProxy.request({ a: 1 });
      return echoed;`);
    expect(payload).toEqual({ a: 1 });
  });
});
