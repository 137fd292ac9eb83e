// LLM code asks the host to parse a feed: an engine whose data handler calls the parser host.
// The limits of both layers hold at once: the parser's wall clock and memory inside a request,
// the isolate's time limit and request cap around it.
import type { SandboxErrorCode } from '@coda/sandbox-core';
import { SandboxEngine } from '@coda/sandbox-isolate';
import { createParserHost, type ParserResult } from '@coda/sandbox-parser-host';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { asError, asResult } from '../support/events.ts';
import { feedParsersPath } from '../support/parsers.ts';

const parserHost = createParserHost({
  module: feedParsersPath,
  confinement: 'required',
  maxConcurrent: 2,
  limits: { timeout: 1_500, memoryBytes: 128 * 1024 * 1024 },
});
const parsed: ParserResult[] = [];
const engine = new SandboxEngine({
  limits: { timeoutMs: 8_000, maxDataRequests: 3 },
  dataHandler: async (params, info) => {
    const { feed, timeout } = params as { feed: string; timeout?: number };
    const result = await parserHost.runParser('parseFeed', feed, {
      signal: info.signal,
      ...(timeout === undefined ? {} : { timeout }),
    });
    parsed.push(result);
    if (!result.ok) throw new Error(`parser ${result.code}: ${result.error}`);
    return result.data;
  },
});
beforeAll(() => engine.ready());
afterAll(async () => {
  await engine.dispose();
  await parserHost.close();
});

const parseAndCatch = (feed: string, timeout?: number) => `
  try { return await dataProxy.request({ feed: ${JSON.stringify(feed)}, timeout: ${timeout ?? 'undefined'} }); }
  catch (error) { return 'caught: ' + error.message; }`;

describe('an engine whose data handler runs the parser host', () => {
  it('LLM code gets the parsed feed and computes on it', async () => {
    const event = await engine.run({
      code: `const totals = await dataProxy.request({ feed: 'cpu,1\\ncpu,2\\nmem,5' });
             return { total: totals.cpu + totals.mem, names: Object.keys(totals) }`,
    });
    expect(asResult(event).payload).toEqual({ total: 8, names: ['cpu', 'mem'] });
    expect(parsed.at(-1)?.confinement?.sandbox).toBe('bubblewrap');
  });

  it('the parser wall clock holds inside the request; the execution goes on', async () => {
    const event = await engine.run({ code: parseAndCatch('SPIN') });
    expect(asResult(event).payload).toBe('caught: parser TIMEOUT: sandbox timeout');
    expect(parsed.at(-1)).toMatchObject({ ok: false, timedOut: true, code: 'TIMEOUT' });
  });

  it('the parser memory limit holds inside the request; the execution goes on', async () => {
    // A long wall clock, so that on a starved machine the memory limit is what ends it.
    const event = await engine.run({
      code: parseAndCatch('BOMB', 20_000),
      limits: { timeoutMs: 30_000 },
    });
    expect(asResult(event).payload).toMatch(/^caught: parser OOM: memory limit exceeded/);
  });

  it("the isolate's time limit ends a request whose parser is still running, and cancels the parser", async () => {
    parsed.length = 0;
    const started = performance.now();
    const event = await engine.run({
      code: 'return await dataProxy.request({ feed: "SPIN", timeout: 30000 })',
      limits: { timeoutMs: 1_000 },
    });
    expect(asError(event, 'TIMEOUT').details).toEqual({ timeoutMs: 1_000 });
    expect(performance.now() - started).toBeLessThan(10_000);
    // The handler's signal aborted the call: the child is gone long before its 30 s limit.
    await vi.waitFor(() => expect(parsed).toHaveLength(1), { timeout: 10_000 });
    expect(parsed[0]).toMatchObject({ ok: false, code: 'CANCELLED', timedOut: false });
    expect(parserHost.load).toEqual({ running: 0, queued: 0 });
  });

  it('the request cap holds: a loop of parse requests ends at request 4, after exactly 3 parses', async () => {
    parsed.length = 0;
    const event = await engine.run({
      code: 'for (let i = 0; i < 100; i++) await dataProxy.request({ feed: "n," + i }); return "all"',
    });
    expect(asError(event, 'LIMIT_EXCEEDED').details).toEqual({
      field: 'maxDataRequests',
      limit: 3,
      size: 4,
    });
    expect(parsed.map((result) => result.data)).toEqual([{ n: 0 }, { n: 1 }, { n: 2 }]);
  });

  it('all at once: each execution ends with the limit of the layer it broke, the clean one succeeds', async () => {
    // [what, code, its time limit, expected outcome]; generous limits but one, so that on a
    // starved machine each run still ends at the limit it is about.
    const runs: [string, string, number, SandboxErrorCode | 'result'][] = [
      [
        'clean',
        'const t = await dataProxy.request({ feed: "a,2" }); return t.a * 21',
        30_000,
        'result',
      ],
      ['parser timeout', 'return await dataProxy.request({ feed: "SPIN" })', 30_000, 'RUNTIME'],
      [
        'parser memory',
        'return await dataProxy.request({ feed: "BOMB", timeout: 20000 })',
        30_000,
        'RUNTIME',
      ],
      [
        'request cap',
        'for (;;) await dataProxy.request({ feed: "a,1" })',
        30_000,
        'LIMIT_EXCEEDED',
      ],
      ['isolate time', 'await dataProxy.request({ feed: "a,1" }); for (;;) {}', 3_000, 'TIMEOUT'],
    ];
    const events = await Promise.all(
      runs.map(([, code, timeoutMs]) => engine.run({ code, limits: { timeoutMs } })),
    );
    const outcomes = events.map((event) => (event.type === 'result' ? 'result' : event.code));
    expect(outcomes).toEqual(runs.map(([, , , expected]) => expected));
    expect(asResult(events[0]).payload).toBe(42);
    expect(asError(events[1], 'RUNTIME').message).toBe('Error: parser TIMEOUT: sandbox timeout');
    expect(asError(events[2], 'RUNTIME').message).toMatch(
      /^Error: parser OOM: memory limit exceeded/,
    );
    expect(parserHost.load).toEqual({ running: 0, queued: 0 });
  });
});
