// processModel 'fork-server': one call's failure or hostile state never reaches the next call.
// Each case runs calls back to back on a host with one slot, so that the benign call after a
// failure goes to the same slot (or to its replacement), with real python3 zygotes in both
// confinement modes. The expected answers are written out here; `token` is drawn once per
// zygote, so an equal token says the same zygote forked both calls.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { dirname } from 'node:path';
import type { Readable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import type { ParserHostOptions, ParserResult, RunParserOptions } from '../src/index.ts';
import { thrown } from './helpers.ts';
import { makePythonHost, testPython } from './python-helpers.ts';

const runner = fileURLToPath(new URL('../src/runner/runner.py', import.meta.url));

const module = fileURLToPath(new URL('./fixtures/python/calls_in_a_row.py', import.meta.url));

/** What `fingerprint` sees in a child forked from an untouched zygote. */
const untouched = {
  counter: 0,
  len: 3,
  dumps: '{"a": 1}',
  'default SIGTERM': true,
  'default SIGALRM': true,
  timer: [0, 0],
  recursion: 1000,
  environ: null,
  'polluted module': false,
  threads: 1,
};

/** The zygote's token in a `fingerprint` answer. */
function tokenOf(result: ParserResult): string {
  return (result.data as unknown as { token: string }).token;
}

describe.each([
  { mode: 'none', options: { confinement: 'none' } },
  { mode: 'default', options: {} },
] as const)('fork server, confinement: $mode', ({ options }) => {
  const host = (more: Partial<ParserHostOptions> = {}) =>
    makePythonHost({
      module,
      processModel: 'fork-server',
      warmSpare: true,
      spares: 1,
      ...options,
      ...more,
    });

  it('patched builtins, signal handlers, a timer, a thread: the next call from the same zygote sees none of it', async () => {
    const parsers = host();
    const first = await parsers.runParser('fingerprint', { n: 1 });
    const polluted = await parsers.runParser('pollute', null);
    // It sleeps past the polluter's timer (0.2 s, then every 50 ms) and thread (30 s).
    const next = await parsers.runParser('fingerprint', { n: 2, sleep: 0.5 });
    const token = tokenOf(first);
    expect(first).toMatchObject({ ok: true, stderr: '' });
    expect(first.data).toEqual({ ...untouched, token, payload: { n: 1 } });
    // The thread started (no audit event covers it) and len was patched, in that child.
    expect(polluted).toMatchObject({
      ok: true,
      data: { thread: 'ok: None', len: -1 },
      exitCode: 0,
      stderr: '',
    });
    expect(next).toMatchObject({ ok: true, exitCode: 0, stderr: '' });
    expect(next.data).toEqual({ ...untouched, token, payload: { n: 2, sleep: 0.5 } });
  });

  it('the failure table, each failure followed by a benign call with its exact answer', async () => {
    const parsers = host();
    // parser, call limits, expected result, whether the zygote stays (an answered failure) or
    // the slot is replaced (killed, or a signal).
    const failures: [string, RunParserOptions, Record<string, unknown>, 'stays' | 'replaced'][] = [
      ['raises', {}, { code: 'RUNTIME', error: 'bad frame: None', exitCode: 1 }, 'stays'],
      [
        'missing',
        {},
        { code: 'VALIDATION', error: 'Unknown parser: missing', exitCode: 1 },
        'stays',
      ],
      [
        'a_set',
        {},
        {
          code: 'VALIDATION',
          error: 'parser result is not JSON: Object of type set is not JSON serializable',
          exitCode: 1,
        },
        'stays',
      ],
      [
        'sleeps',
        { timeout: 500 },
        { code: 'TIMEOUT', error: 'sandbox timeout', timedOut: true, signal: 'SIGKILL' },
        'replaced',
      ],
      [
        'spins',
        { cpuSecs: 1 },
        { code: 'TIMEOUT', error: 'CPU time limit exceeded (1 s)', signal: 'SIGXCPU' },
        'replaced',
      ],
      [
        'hoards',
        { memoryBytes: 64 * 1024 * 1024 },
        {
          code: 'OOM',
          error: 'memory limit exceeded: MemoryError (RLIMIT_AS 67108864 bytes)',
          exitCode: 1,
        },
        'stays',
      ],
      [
        'crashes',
        {},
        {
          code: 'CRASH',
          error: 'child was killed by SIGSEGV without a response',
          signal: 'SIGSEGV',
          exitCode: null,
        },
        'replaced',
      ],
    ];
    await parsers.warm();
    let token = tokenOf(await parsers.runParser('fingerprint', {}));
    for (const [parser, limits, expected, zygote] of failures) {
      const failed = await parsers.runParser(parser, null, limits);
      expect({ parser, ...failed }).toMatchObject({ parser, ok: false, ...expected });
      // The replacement (if any) started and ready, so that the benign call is forked too.
      await parsers.warm();
      const benign = await parsers.runParser('fingerprint', { after: parser });
      expect({ parser, ...benign }).toMatchObject({ parser, ok: true, exitCode: 0, stderr: '' });
      const seen = tokenOf(benign);
      expect({ parser, zygote: seen === token ? 'stays' : 'replaced' }).toEqual({ parser, zygote });
      expect(benign.data).toEqual({ ...untouched, token: seen, payload: { after: parser } });
      token = seen;
    }
  });

  it('a process left behind past the hook: the slot is killed before the next call is sent', async () => {
    const parsers = host();
    const first = await parsers.runParser('fingerprint', { n: 1 });
    const left = await parsers.runParser('leave_process', null);
    await parsers.warm();
    // It sleeps a second: a leftover still in the slot would write into its stderr and channel.
    const next = await parsers.runParser('fingerprint', { n: 2, sleep: 1 });
    const again = await parsers.runParser('fingerprint', { n: 3 });
    // The call itself answered; what its leftover printed before the call ended is its own.
    expect(left).toMatchObject({ ok: true, data: 'left behind', exitCode: 0 });
    expect(next).toMatchObject({ ok: true, exitCode: 0, stderr: '' });
    const token = tokenOf(next);
    expect(token).not.toBe(tokenOf(first));
    expect(next.data).toEqual({ ...untouched, token, payload: { n: 2, sleep: 1 } });
    // Both from the replacement zygote: forked, not spawned.
    expect(again.data).toEqual({ ...untouched, token, payload: { n: 3 } });
  });

  it('calls at once: each answer carries its own payload; more memory than the slot has is spawned', async () => {
    const parsers = host({ spares: 2, maxConcurrent: 4 });
    await parsers.warm();
    const slot = tokenOf(await parsers.runParser('fingerprint', {}));
    const results = await Promise.all(
      Array.from({ length: 12 }, (_, n) => parsers.runParser('fingerprint', { n })),
    );
    expect(results.map((result) => [result.ok, result.stderr])).toEqual(
      Array.from({ length: 12 }, () => [true, '']),
    );
    results.forEach((result, n) => {
      expect(result.data).toEqual({ ...untouched, token: tokenOf(result), payload: { n } });
    });
    // Its own child: imported afresh, so a token of its own.
    const bigger = await parsers.runParser('fingerprint', {}, { memoryBytes: 512 * 1024 * 1024 });
    expect(bigger).toMatchObject({ ok: true, exitCode: 0 });
    expect(tokenOf(bigger)).not.toBe(slot);
  });

  it('RLIMIT_CPU is per call: calls that each burn most of a 1 s limit all finish', async () => {
    const parsers = host();
    const results = [];
    for (let call = 0; call < 3; call++) {
      results.push(
        await parsers.runParser('burns', { seconds: 0.6 }, { cpuSecs: 1, timeout: 30_000 }),
      );
    }
    expect(results.map((result) => [result.ok, result.data])).toEqual([
      [true, 'burnt'],
      [true, 'burnt'],
      [true, 'burnt'],
    ]);
  });
});

describe('the zygote alone', () => {
  it('stdin closed (the host gone): the waiting child finds no request and the zygote exits', async () => {
    const config = { module, readPaths: [], memoryBytes: 256 * 1024 * 1024, cpuSecs: 5 };
    const zygote = spawn(
      testPython,
      ['-I', '-S', '-B', runner, JSON.stringify({ ...config, forkServer: true })],
      { cwd: dirname(module), env: {}, stdio: ['pipe', 'pipe', 'pipe', 'pipe', 'pipe'] },
    );
    let control = '';
    (zygote.stdio[4] as Readable).on('data', (chunk: Buffer) => {
      control += chunk.toString();
    });
    let stderr = '';
    zygote.stderr?.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    zygote.stdin?.end();
    const [exitCode] = await once(zygote, 'exit');
    expect({ exitCode, control, stderr }).toEqual({
      exitCode: 3,
      control: '{"ready":true}\n{"exitCode":2,"signal":null,"leftover":false}\n',
      stderr: 'parser runner: stdin closed before the nonce arrived\n',
    });
  });
});

describe('processModel validation', () => {
  it('fork-server needs a Python module and at least one slot; other values are refused', () => {
    const forNode = thrown(() =>
      makePythonHost({
        module: new URL('./fixtures/parsers.mjs', import.meta.url),
        python: undefined,
        processModel: 'fork-server',
        warmSpare: true,
      }),
    );
    expect(forNode.issues.map((issue) => [issue.path, issue.message, issue.received])).toEqual([
      ['processModel', 'a fork server needs runtime python', '"fork-server"'],
    ]);
    const noSlots = thrown(() => makePythonHost({ module, processModel: 'fork-server' }));
    expect(noSlots.message).toBe(
      'Invalid parser host options: processModel: a fork server needs spares (at least 1)',
    );
    const zeroSlots = thrown(() =>
      makePythonHost({ module, processModel: 'fork-server', warmSpare: true, spares: 0 }),
    );
    expect(zeroSlots.issues.map((issue) => issue.path)).toEqual(['processModel']);
    const unknown = thrown(() => makePythonHost({ module, processModel: 'reuse' as never }));
    expect(unknown.issues.map((issue) => issue.path)).toEqual(['processModel']);
  });

  it('the default is spawn', () => {
    expect(makePythonHost({ module }).settings.processModel).toBe('spawn');
  });
});
