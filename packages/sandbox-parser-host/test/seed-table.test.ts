// Seed 004's failure table, row by row, with real children.
import { describe, expect, it } from 'vitest';
import { makeHost } from './helpers.ts';

describe('the seed table', () => {
  it('success: ok, data, exit code 0', async () => {
    const host = makeHost();
    const result = await host.runParser('flatten', {
      frames: [{ values: [1, 2] }, { values: [3] }],
    });
    expect(result).toMatchObject({ ok: true, data: [1, 2, 3], exitCode: 0, timedOut: false });
    expect(result.error).toBeUndefined();
    expect(result.durationMs).toBeGreaterThan(0);
  });

  it('forwards kwargs and passes undefined back as null', async () => {
    const host = makeHost();
    const echoed = await host.runParser('echo', { a: 1 }, { kwargs: { strict: true } });
    expect(echoed.data).toEqual({ payload: { a: 1 }, kwargs: { strict: true } });
    const empty = await host.runParser('nothing', null);
    expect(empty).toMatchObject({ ok: true, data: null, exitCode: 0 });
  });

  it('the parser throws (sync, async, a non-Error): the message and exit code 1', async () => {
    const host = makeHost();
    const [sync, rejected, thrownString] = await Promise.all([
      host.runParser('throws', { id: 7 }),
      host.runParser('rejects', null),
      host.runParser('throwsString', null),
    ]);
    expect(sync).toMatchObject({ ok: false, error: 'bad frame: 7', exitCode: 1, code: 'RUNTIME' });
    expect(rejected).toMatchObject({ ok: false, error: 'async parser failed', exitCode: 1 });
    expect(thrownString).toMatchObject({ ok: false, error: 'plain string', exitCode: 1 });
    expect(sync.data).toBeUndefined();
  });

  it('wall-clock timeout: timedOut and exactly "sandbox timeout"', async () => {
    const host = makeHost();
    const started = performance.now();
    const result = await host.runParser('sleep', { ms: 60_000 }, { timeout: 400 });
    expect(result).toMatchObject({
      ok: false,
      timedOut: true,
      error: 'sandbox timeout',
      code: 'TIMEOUT',
      exitCode: null,
      signal: 'SIGKILL',
    });
    expect(performance.now() - started).toBeLessThan(15_000);
  });

  it('child crash or empty output: a message and the exit code', async () => {
    const host = makeHost();
    const [exitZero, exitSeven, aborted] = await Promise.all([
      host.runParser('exitEarly', null),
      host.runParser('exitWithCode', null),
      host.runParser('abort', null),
    ]);
    expect(exitZero).toMatchObject({
      ok: false,
      exitCode: 0,
      code: 'CRASH',
      error: 'child exited with code 0 without a response',
    });
    expect(exitSeven).toMatchObject({
      ok: false,
      exitCode: 7,
      error: 'child exited with code 7 without a response',
    });
    expect(aborted).toMatchObject({
      ok: false,
      exitCode: null,
      signal: 'SIGABRT',
      error: 'child was killed by SIGABRT without a response',
    });
  });

  it('unknown parser: exactly "Unknown parser: NAME", also for inherited and non-function names', async () => {
    const host = makeHost({ maxConcurrent: 2 });
    const names = ['missing', '__proto__', 'constructor', 'toString', 'notAFunction', 'then'];
    const results = await Promise.all(names.map((name) => host.runParser(name, {})));
    results.forEach((result, index) => {
      expect(result).toMatchObject({
        ok: false,
        error: `Unknown parser: ${names[index]}`,
        code: 'VALIDATION',
        exitCode: 1,
        timedOut: false,
      });
    });
  });

  it('the default export is an own exported function too', async () => {
    const host = makeHost();
    expect(await host.runParser('default', null)).toMatchObject({ ok: true, data: 'default' });
  });

  it('a module that throws at import: every call says so, warm spare or not', async () => {
    const host = makeHost({
      module: new URL('./fixtures/broken-parsers.mjs', import.meta.url),
      warmSpare: true,
    });
    await host.warm();
    const results = [await host.runParser('never', null), await host.runParser('never', null)];
    for (const result of results) {
      expect(result).toMatchObject({
        ok: false,
        code: 'RUNTIME',
        exitCode: 1,
        error: 'cannot load parser module: broken at import',
      });
    }
  });
});
