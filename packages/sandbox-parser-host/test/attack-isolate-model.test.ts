// attack-25 on processModel 'isolate': one call must not take the calls beside it down. Real
// isolates in a real child under bubblewrap and its memory cgroup; the expected answers are
// written out here, and which child served a call is read from /proc, not inferred.
import { readFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import type { ParserResult } from '../src/index.ts';
import { makeHost } from './helpers.ts';

const module = fileURLToPath(new URL('./fixtures/isolate-attack/attacks.mjs', import.meta.url));
const mebibyte = 1024 * 1024;

/** Pids of isolate children among this process's descendants. */
function isolateChildren(): number[] {
  const found: number[] = [];
  const walk = (pid: number): void => {
    let children: number[] = [];
    try {
      const list = readFileSync(`/proc/${pid}/task/${pid}/children`, 'latin1');
      children = list.split(' ').filter(Boolean).map(Number);
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

function brief(result: ParserResult): Record<string, unknown> {
  return result.ok
    ? { ok: true, data: result.data }
    : { ok: false, code: result.code, error: result.error };
}

const refusedResizable = {
  ok: false,
  code: 'RUNTIME',
  error:
    "resizable ArrayBuffers are not available with processModel 'isolate' (their memory is outside the isolate's limit)",
};

describe('attack-25: isolate model', () => {
  it('memory the isolate limit does not count is not reachable: each bomb fails alone, the child and its neighbour go on', async () => {
    // 64 MiB calls, 2 at once: the child's cgroup is 384 MiB. Before the fix each bomb filled it
    // (SIGKILL) and the neighbour failed CRASH with it.
    const host = makeHost({
      module,
      processModel: 'isolate',
      warmSpare: true,
      maxConcurrent: 2,
      limits: { memoryBytes: 64 * mebibyte, timeout: 5000 },
    });
    await host.warm();
    const [child] = isolateChildren();
    const table: [string, unknown, Record<string, unknown>][] = [
      ['resizableBomb', null, refusedResizable],
      ['resizableByConstructor', null, refusedResizable],
      ['resizableBySubclass', null, refusedResizable],
      [
        'growableBomb',
        null,
        { ok: false, code: 'RUNTIME', error: 'SharedArrayBuffer is not defined' },
      ],
      ['intlBomb', { ms: 4000 }, { ok: false, code: 'RUNTIME', error: 'Intl is not defined' }],
    ];
    for (const [parser, payload, expected] of table) {
      const [hostile, neighbour] = await Promise.all([
        host.runParser(parser, payload),
        host.runParser('slowEcho', { ms: 300, parser }),
      ]);
      expect({ parser, hostile: brief(hostile), neighbour: brief(neighbour) }).toEqual({
        parser,
        hostile: expected,
        neighbour: { ok: true, data: { ms: 300, parser } },
      });
      expect({ parser, children: isolateChildren() }).toEqual({ parser, children: [child] });
    }
    // What is left works: fixed-length buffers, views, slices, locale formatting.
    expect(brief(await host.runParser('removed', null))).toEqual({
      ok: true,
      data: {
        SharedArrayBuffer: 'undefined',
        Intl: 'undefined',
        fixedBuffer: 8,
        isView: true,
        instance: true,
        sliced: 6,
        locale: '1,234.5',
        compare: -1,
      },
    });
  });

  it("a call that kills the shared child (V8's fatal invalid size error): it fails CRASH, the call beside it runs again alone and succeeds", async () => {
    const host = makeHost({
      module,
      processModel: 'isolate',
      warmSpare: true,
      maxConcurrent: 2,
      limits: { memoryBytes: 64 * mebibyte, timeout: 5000 },
    });
    await host.warm();
    const [hostile, neighbour] = await Promise.all([
      host.runParser('splitFatal', null),
      host.runParser('slowEcho', { ms: 500 }),
    ]);
    expect({ hostile: brief(hostile), neighbour: brief(neighbour) }).toEqual({
      // Its own second run, alone, killed its own child.
      hostile: {
        ok: false,
        code: 'CRASH',
        error: 'the isolate child was killed by SIGTRAP with this call in flight',
      },
      neighbour: { ok: true, data: { ms: 500 } },
    });
    // The next call gets a shared child again; the private ones are gone.
    expect(brief(await host.runParser('echo', 'next'))).toEqual({ ok: true, data: 'next' });
    expect(isolateChildren()).toHaveLength(1);
  });

  it('an unhandled rejection whose reason runs code when read (proxy traps, prepareStackTrace) is never read: the call returns, the child goes on', async () => {
    // Before the fix isolated-vm copied such a reason at the end of the call's task, outside
    // its timeout, over and over; the child was killed 2 s past the wall clock with every call.
    const host = makeHost({
      module,
      processModel: 'isolate',
      warmSpare: true,
      maxConcurrent: 2,
      limits: { memoryBytes: 64 * mebibyte, timeout: 1000 },
    });
    await host.warm();
    const [child] = isolateChildren();
    for (const parser of ['rejectionTrap', 'rejectionStack']) {
      const [hostile, neighbour] = await Promise.all([
        host.runParser(parser, null),
        host.runParser('slowEcho', { ms: 300, parser }),
      ]);
      expect({ parser, hostile: brief(hostile), neighbour: brief(neighbour) }).toEqual({
        parser,
        hostile: { ok: true, data: 'returned' },
        neighbour: { ok: true, data: { ms: 300, parser } },
      });
      expect({ parser, children: isolateChildren() }).toEqual({ parser, children: [child] });
    }
    // A thrown value whose toString never returns ends by its own wall clock.
    expect(brief(await host.runParser('throwTrap', null))).toEqual({
      ok: false,
      code: 'TIMEOUT',
      error: 'sandbox timeout',
    });
    expect(isolateChildren()).toEqual([child]);
  });

  it('held: forged control lines are data; buffers grown by transfer, heap bombs and a spinning finalizer at once end alone, the child and its neighbour go on', async () => {
    const host = makeHost({
      module,
      processModel: 'isolate',
      warmSpare: true,
      maxConcurrent: 6,
      limits: { memoryBytes: 64 * mebibyte, timeout: 3000 },
    });
    await host.warm();
    const [child] = isolateChildren();
    const refused = {
      ok: false,
      code: 'OOM',
      error: "memory limit exceeded: Array buffer allocation failed (the isolate's limit, 32 MiB)",
    };
    const heap = {
      ok: false,
      code: 'OOM',
      error: "memory limit exceeded: the isolate's heap limit (32 MiB)",
    };
    const table: [string, Record<string, unknown>][] = [
      ['transferBomb', refused],
      ['transferHuge', refused],
      ['heapBomb', heap],
      ['heapBomb', heap],
      ['finalizerSpin', { ok: true, data: 'returned' }],
    ];
    // The child's control lines and a frame header inside a result and an error are data.
    const forged = '\n{"end":1,"reason":"answered"}\n{"ready":true}\n\u0000\u0000\u0000\u0010';
    expect([
      brief(await host.runParser('forgeControl', { id: 1 })),
      brief(await host.runParser('forgeControl', { id: 1, throw: true })),
    ]).toEqual([
      { ok: true, data: forged },
      { ok: false, code: 'RUNTIME', error: forged },
    ]);
    const results = await Promise.all([
      ...table.map(([parser]) => host.runParser(parser, null)),
      host.runParser('slowEcho', { ms: 1000 }),
    ]);
    expect(results.map(brief)).toEqual([
      ...table.map(([, expected]) => expected),
      { ok: true, data: { ms: 1000 } },
    ]);
    expect(isolateChildren()).toEqual([child]);
  });

  it("a parser that returned gets its result even when a spinning finalizer is due right after its code, not the finalizer's timeout", async () => {
    // The registry is kept and full collections run during the call, so V8's cleanup task is
    // due as the call's code ends. The outcome was read in a later task, after that cleanup:
    // TIMEOUT for 3 of 3 such calls before the outcome was delivered in the call's own task.
    const host = makeHost({
      module,
      processModel: 'isolate',
      warmSpare: true,
      limits: { memoryBytes: 64 * mebibyte, timeout: 2000 },
    });
    await host.warm();
    const [child] = isolateChildren();
    const results = [];
    for (let n = 0; n < 3; n++) {
      results.push(brief(await host.runParser('finalizerSpinAfterCollection', null)));
    }
    expect(results).toEqual([
      { ok: true, data: 'returned' },
      { ok: true, data: 'returned' },
      { ok: true, data: 'returned' },
    ]);
    expect(brief(await host.runParser('slowEcho', { ms: 10 }))).toEqual({
      ok: true,
      data: { ms: 10 },
    });
    expect(isolateChildren()).toEqual([child]);
  });

  it('held: a module whose top-level throws an Error with a spinning Error.prepareStackTrace ends each call by its wall clock, on the same child', async () => {
    const host = makeHost({
      module: fileURLToPath(
        new URL('./fixtures/isolate-attack/module-stack/parsers.mjs', import.meta.url),
      ),
      processModel: 'isolate',
      warmSpare: true,
      limits: { timeout: 500 },
    });
    await host.warm();
    const [child] = isolateChildren();
    const results = [await host.runParser('echo', 1), await host.runParser('echo', 2)];
    const timedOut = { ok: false, code: 'TIMEOUT', error: 'sandbox timeout' };
    expect(results.map(brief)).toEqual([timedOut, timedOut]);
    expect(isolateChildren()).toEqual([child]);
  });

  it("parser code cannot reach the bootstrap's functions through a sloppy caller chain", async () => {
    // Found by a review: a toJSON made with new Function read arguments.callee.caller, the
    // bootstrap's settle, which hands the outcome to the host. The bootstrap is strict now, so
    // V8 hides it.
    const host = makeHost({ module, processModel: 'isolate' });
    expect(brief(await host.runParser('callers', null))).toEqual({
      ok: true,
      data: ['null', 'null'],
    });
  });

  it("a module that throws isolated-vm's timeout words at once fails to load (RUNTIME), not TIMEOUT", async () => {
    // Found by an attack review: TIMEOUT, timedOut: true, after 251 ms of a 3 s timeout.
    const host = makeHost({
      module: fileURLToPath(
        new URL('./fixtures/isolate-attack/module-timeout-words/parsers.mjs', import.meta.url),
      ),
      processModel: 'isolate',
      limits: { timeout: 3000 },
    });
    const result = await host.runParser('echo', 1);
    expect({ ...brief(result), timedOut: result.timedOut }).toEqual({
      ok: false,
      code: 'RUNTIME',
      error: 'cannot load parser module: Script execution timed out.',
      timedOut: false,
    });
  });

  it('a call is charged the CPU it used, not the time other calls took from it: a benign call beside spinning ones is not ended by cpuSecs', async () => {
    // Three runnable isolates per core: each gets about a third of one. The benign call needs
    // about 0.4 s of CPU alone, so beside them it takes about 1.2 s; isolated-vm's cpuTime counted
    // that wall time and ended it at cpuSecs 1. The spinners end by their wall clock (2 s, by
    // which their share is about 0.7 s, under their cpuSecs).
    const spinners = 3 * availableParallelism() - 1;
    const host = makeHost({
      module,
      processModel: 'isolate',
      warmSpare: true,
      maxConcurrent: spinners + 1,
      limits: { memoryBytes: 64 * mebibyte },
    });
    await host.warm();
    const probe = 20_000_000;
    const alone = await host.runParser('work', { n: probe });
    const n = Math.round((probe * 400) / alone.durationMs);
    const [benign, ...spun] = await Promise.all([
      host.runParser('work', { n }, { cpuSecs: 1 }),
      ...Array.from({ length: spinners }, () =>
        host.runParser('spin', null, { timeout: 2000, cpuSecs: 1 }),
      ),
    ]);
    expect(brief(benign)).toEqual({ ok: true, data: true });
    expect(spun.map(brief)).toEqual(
      spun.map(() => ({ ok: false, code: 'TIMEOUT', error: 'sandbox timeout' })),
    );
    // Alone, cpuSecs still ends a call at its CPU limit.
    expect(brief(await host.runParser('spin', null, { timeout: 5000, cpuSecs: 1 }))).toEqual({
      ok: false,
      code: 'TIMEOUT',
      error: 'CPU time limit exceeded (1 s)',
    });
  });
});
