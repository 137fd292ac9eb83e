// The HTTP API over real HTTP: a real server, a real isolate engine, real guards on a real
// redis-server, and a real pino logger whose lines the tests read.
import { randomUUID } from 'node:crypto';
import { defaultExecutionLimits, type SandboxEvent, type TerminalEvent } from '@coda/sandbox-core';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { examples } from '../src/snippets/examples.ts';
import { captureStream } from './helpers/captured-stream.ts';
import { type StartedServer, startDemoServer } from './helpers/demo-server.ts';
import { readSse, waitFor } from './helpers/sse.ts';

let started: StartedServer;

/** The one error shape: core's SandboxErrorJSON under `error`. */
interface ErrorBody {
  error: {
    code: string;
    message: string;
    details: { issues: { path: string; message: string; received: string }[] };
  };
}

/** Where the server's pino logger writes: a pipe, so one JSON line per entry. */
const log = captureStream(false);

/** Every line the server logged so far, parsed. */
const logLines = () =>
  log
    .text()
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => JSON.parse(line) as Record<string, unknown>);

beforeAll(async () => {
  started = await startDemoServer({ logger: pino(log.stream) });
  await started.engine.ready();
});
afterAll(() => started.stop());

function post(body: unknown, headers: Record<string, string> = {}) {
  return fetch(`${started.url}/v1/executions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-user-id': randomUUID(), ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
}

/** A loop that reports once, then runs until cancelled (or its 25 s clock). */
const longRunning = {
  code: "reportStatus('started');\nwhile (true) { await Promise.resolve(); }",
  limits: { timeoutMs: 25_000 },
};

describe('GET /healthz', () => {
  it('answers ok with the number of running executions', async () => {
    const response = await fetch(`${started.url}/healthz`);
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ status: 'ok', running: 0 });
  });
});

describe('GET /v1/limits, /v1/examples, /v1/tools, /favicon.ico', () => {
  it("publishes the engine's tools as TypeScript declarations", async () => {
    const { declarations } = (await (await fetch(`${started.url}/v1/tools`)).json()) as {
      declarations: string;
    };
    expect(declarations).toBe(started.engine.toolDeclarations());
    expect(declarations).toContain('  getOrder(input: {');
    expect(declarations).toContain('  revenueByRegion(input: {');
  });

  it('publishes the admission limits, the execution ceilings and the body cap', async () => {
    const response = await fetch(`${started.url}/v1/limits`);
    expect(await response.json()).toEqual({
      admission: {
        maxExecutionsPerTurn: 2,
        ratePerUser: 3,
        windowMs: 60_000,
        burst: 3,
        maxConcurrentPerUser: 4,
      },
      execution: defaultExecutionLimits,
      maxBodyBytes: 1_048_576,
    });
  });

  it('lists the playground examples and attacks, and serves a favicon', async () => {
    const catalogue = (await (await fetch(`${started.url}/v1/examples`)).json()) as {
      examples: { id: string }[];
      attacks: { id: string; containedBy: string[] }[];
    };
    expect(catalogue.examples.map((example) => example.id)).toEqual(
      examples.map((example) => example.id),
    );
    expect(catalogue.attacks.find((attack) => attack.id === 'sync-cpu')?.containedBy).toEqual([
      'TIMEOUT',
    ]);
    const icon = await fetch(`${started.url}/favicon.ico`);
    expect(icon.status).toBe(200);
    expect(icon.headers.get('content-type')).toBe('image/svg+xml; charset=utf-8');
    expect(await icon.text()).toContain('<svg');
  });
});

describe('POST /v1/executions', () => {
  it('streams status events, then the result, as Server-Sent Events', async () => {
    const statusStream = examples.find((example) => example.id === 'status-stream')!;
    const response = await post({ code: statusStream.code });
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toBe('text/event-stream');
    expect(response.headers.get('x-execution-id')).toMatch(/^[0-9a-f-]{36}$/);
    const events: SandboxEvent[] = [];
    for await (const event of readSse(response.body!)) events.push(event);
    const statuses = events.filter((event) => event.type === 'status');
    expect(statuses.map((event) => event.message)).toContain('Checked acme (1/8)');
    expect(statuses).toHaveLength(10);
    const last = events.at(-1) as TerminalEvent;
    expect(last.type).toBe('result');
    expect(last.type === 'result' && Array.isArray(last.payload) && last.payload.length).toBe(8);
    expect(last.stats?.dataRequests).toBe(9);
  });

  it('returns only the terminal event as JSON for Accept: application/json', async () => {
    const response = await post({ code: 'return 6 * 7;' }, { accept: 'application/json' });
    expect(response.status).toBe(200);
    const event = (await response.json()) as TerminalEvent;
    expect(event).toMatchObject({ type: 'result', payload: 42 });
  });

  it('logs the request, the admission and the end, each with the user and the execution id', async () => {
    const userId = `logged-${randomUUID()}`;
    const response = await post(
      { code: 'return 1;' },
      { 'x-user-id': userId, accept: 'application/json' },
    );
    await response.json();
    const executionId = response.headers.get('x-execution-id');
    await waitFor(() =>
      logLines().some((line) => line.msg === 'execution ended' && line.userId === userId),
    );
    const lines = logLines().filter((line) => line.executionId === executionId);
    expect(lines.map((line) => [line.msg, line.userId]).sort()).toEqual([
      ['execution admitted', userId],
      ['execution ended', userId],
      ['request', userId],
    ]);
    expect(lines.find((line) => line.msg === 'request')).toMatchObject({ status: 200, level: 30 });
    expect(lines.find((line) => line.msg === 'execution ended')).toMatchObject({
      outcome: 'result',
    });
  });

  it('reports a contained attack as its error event', async () => {
    const response = await post(
      { code: 'while (true) {}', limits: { timeoutMs: 300 } },
      { accept: 'application/json' },
    );
    expect(await response.json()).toMatchObject({ type: 'error', code: 'TIMEOUT' });
  });

  it('refuses malformed JSON with 400 VALIDATION', async () => {
    const response = await post('{"code": "return 1"', {});
    expect(response.status).toBe(400);
    expect(await response.json()).toEqual({
      error: {
        name: 'SandboxValidationError',
        code: 'VALIDATION',
        message: 'body: Malformed JSON in request body',
        details: {
          issues: [{ path: '', message: 'Malformed JSON in request body', received: '[body]' }],
        },
      },
    });
  });

  it('refuses a body that is not JSON with 415, naming the header', async () => {
    const response = await post({ code: 'return 1' }, { 'content-type': 'text/plain' });
    expect(response.status).toBe(415);
    const { error } = (await response.json()) as ErrorBody;
    expect(error.code).toBe('VALIDATION');
    expect(error.details.issues).toEqual([
      {
        path: 'headers.content-type',
        message: 'send the body as application/json',
        received: '"text/plain"',
      },
    ]);
  });

  it('names every bad field, and the missing x-user-id header, in one 400', async () => {
    const response = await fetch(`${started.url}/v1/executions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ code: 5, limits: { memoryMb: 1_024, timeoutMs: -1 }, extra: true }),
    });
    expect(response.status).toBe(400);
    const { error } = (await response.json()) as {
      error: { code: string; details: { issues: { path: string; message: string }[] } };
    };
    expect(error.code).toBe('VALIDATION');
    expect(error.details.issues.map((issue) => issue.path).sort()).toEqual([
      'code',
      'extra',
      'headers.x-user-id',
      'limits.memoryMb',
      'limits.timeoutMs',
    ]);
    const memory = error.details.issues.find((issue) => issue.path === 'limits.memoryMb');
    expect(memory?.message).toBe('at most 256 on this server');
  });

  it('refuses a body over the cap with 413, by Content-Length and while streaming', async () => {
    const big = JSON.stringify({ code: `return '${'x'.repeat(1_100_000)}';` });
    const declared = await post(big);
    expect(declared.status).toBe(413);
    expect(await declared.json()).toMatchObject({
      error: { code: 'VALIDATION', details: { maxBytes: 1_048_576, issues: [{ path: 'body' }] } },
    });

    // Chunked, no Content-Length: refused once the running count passes the cap.
    const stream = new ReadableStream<Uint8Array>({
      start(controller) {
        const chunk = new TextEncoder().encode(big.slice(0, 200_000));
        for (let sent = 0; sent < 6; sent++) controller.enqueue(chunk);
        controller.close();
      },
    });
    const streamed = await fetch(`${started.url}/v1/executions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-user-id': `chunked-${randomUUID()}` },
      body: stream,
      duplex: 'half',
    } as RequestInit);
    expect(streamed.status).toBe(413);
  });

  it('refuses a user over the rate limit with 429 and Retry-After', async () => {
    const userId = `busy-${randomUUID()}`;
    const statuses: number[] = [];
    let refused: Response | undefined;
    for (let attempt = 0; attempt < 4; attempt++) {
      const response = await post(
        { code: 'return 1;' },
        { 'x-user-id': userId, accept: 'application/json' },
      );
      if (attempt < 3) await response.arrayBuffer();
      statuses.push(response.status);
      refused = response;
    }
    expect(statuses).toEqual([200, 200, 200, 429]);
    const body = (await refused!.json()) as {
      error: { code: string; details: { retryAfterMs: number } };
    };
    expect(body.error.code).toBe('RATE_LIMITED');
    // One figure in two units: the header in whole seconds, rounded up from the details.
    const seconds = Math.ceil(body.error.details.retryAfterMs / 1_000);
    expect(refused!.headers.get('retry-after')).toBe(String(seconds));
    expect(seconds).toBeGreaterThanOrEqual(1);
    // The refusal is logged with its code, the user and the execution id it was answered with.
    const executionId = refused!.headers.get('x-execution-id');
    expect(executionId).toMatch(/^[0-9a-f-]{36}$/);
    await waitFor(() => logLines().some((line) => line.executionId === executionId));
    expect(logLines().find((line) => line.executionId === executionId)).toMatchObject({
      level: 40,
      msg: 'request refused',
      method: 'POST',
      path: '/v1/executions',
      status: 429,
      code: 'RATE_LIMITED',
      userId,
    });
  });

  it('refuses a turn over its budget with 429 BUDGET_EXHAUSTED', async () => {
    const turn = { conversationId: `chat-${randomUUID()}`, turnId: 'turn-1' };
    const codes: string[] = [];
    for (let attempt = 0; attempt < 3; attempt++) {
      const response = await post({ code: 'return 1;', ...turn }, { accept: 'application/json' });
      const body = (await response.json()) as { type?: string; error?: { code: string } };
      codes.push(
        response.status === 200 ? String(body.type) : `${response.status} ${body.error?.code}`,
      );
    }
    expect(codes).toEqual(['result', 'result', '429 BUDGET_EXHAUSTED']);
  });

  it('cancels the execution when the client disconnects mid-stream', async () => {
    const disconnect = new AbortController();
    const started_ = Date.now();
    const response = await fetch(`${started.url}/v1/executions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-user-id': randomUUID() },
      body: JSON.stringify(longRunning),
      signal: disconnect.signal,
    });
    const events = readSse(response.body!);
    expect((await events.next()).value).toMatchObject({ type: 'status', message: 'started' });
    expect(started.server.running).toBe(1);
    disconnect.abort();
    // Long before the 25 s clock: the server noticed the disconnect and cancelled.
    await waitFor(() => started.server.running === 0 && started.engine.stats().active === 0);
    expect(Date.now() - started_).toBeLessThan(15_000);
  });

  it('answers 404 for an unknown path and 405 for a wrong method', async () => {
    const missing = await fetch(`${started.url}/nope`);
    expect(missing.status).toBe(404);
    expect(((await missing.json()) as ErrorBody).error.details.issues).toEqual([
      { path: 'path', message: 'no such route', received: '/nope' },
    ]);
    const wrong = await fetch(`${started.url}/v1/executions`);
    expect(wrong.status).toBe(405);
    expect(wrong.headers.get('allow')).toBe('POST');
    expect(((await wrong.json()) as ErrorBody).error).toMatchObject({
      code: 'VALIDATION',
      details: { allow: 'POST' },
    });
  });
});

describe('graceful shutdown', () => {
  it('ends running executions with CANCELLED, then closes', async () => {
    const own = await startDemoServer();
    try {
      const response = await fetch(`${own.url}/v1/executions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-user-id': `shutdown-${randomUUID()}` },
        body: JSON.stringify(longRunning),
      });
      const events = readSse(response.body!);
      expect((await events.next()).value).toMatchObject({ type: 'status' });
      const closed = own.server.close();
      const rest: SandboxEvent[] = [];
      for await (const event of events) rest.push(event);
      expect(rest).toEqual([
        expect.objectContaining({
          type: 'error',
          code: 'CANCELLED',
          message: 'Server shutting down',
        }),
      ]);
      await closed;
      expect(own.server.running).toBe(0);
      await expect(fetch(`${own.url}/healthz`)).rejects.toThrow();
    } finally {
      await own.stop();
    }
  });
});
