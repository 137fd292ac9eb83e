// The executions a soak run draws from: benign code and attacks, each with the terminal event it
// must end with. Drawn in a random order from a seeded generator, so a failing run replays.
import type { ExecutionLimits, SandboxEvent, TerminalEvent } from '@coda/sandbox-core';
import { expect } from 'vitest';

/** One kind of execution and how it must end. */
export interface SoakCase {
  readonly name: string;
  /** Relative frequency in the mix. */
  readonly weight: number;
  code(i: number): string;
  readonly limits?: Partial<ExecutionLimits>;
  /** Throws (an assertion) when `events` is not what this case must produce. */
  check(events: readonly SandboxEvent[], i: number): void;
}

function terminal(events: readonly SandboxEvent[]): TerminalEvent {
  const last = events.at(-1);
  expect(last?.type === 'result' || last?.type === 'error', 'a terminal event last').toBe(true);
  return last as TerminalEvent;
}

function endsWith(...codes: string[]) {
  return (events: readonly SandboxEvent[]) => {
    const event = terminal(events);
    expect(event.type === 'error' ? event.code : 'result', JSON.stringify(event)).toBeOneOf(codes);
  };
}

function resultIs(expected: (i: number) => unknown) {
  return (events: readonly SandboxEvent[], i: number) => {
    const event = terminal(events);
    expect(event.type, JSON.stringify(event)).toBe('result');
    expect(event.type === 'result' ? event.payload : undefined).toEqual(expected(i));
  };
}

const inflated = `return 1; /*${'x'.repeat(600_000)}*/`;

/** The mix: about two thirds benign, one third attacks. */
export const soakCases: readonly SoakCase[] = [
  { name: 'arithmetic', weight: 20, code: (i) => `return ${i} * 2`, check: resultIs((i) => i * 2) },
  {
    name: 'data request',
    weight: 20,
    code: (i) => `const row = await dataProxy.request({ i: ${i} }); return row.i + 1`,
    check: resultIs((i) => i + 1),
  },
  {
    name: 'status and console',
    weight: 10,
    code: () => 'reportStatus("working"); console.log("a", 1); console.warn("b"); return "done"',
    check: (events, i) => {
      expect(events.map((event) => event.type)).toEqual(['status', 'status', 'status', 'result']);
      resultIs(() => 'done')(events, i);
    },
  },
  {
    name: 'json work',
    weight: 10,
    code: (i) =>
      `const rows = Array.from({ length: 200 }, (_, k) => ({ k, v: k * ${i % 7} }));
       return JSON.parse(JSON.stringify(rows)).reduce((sum, row) => sum + row.v, 0)`,
    check: resultIs((i) => 19_900 * (i % 7)),
  },
  {
    name: 'escape probe',
    weight: 5,
    code: () =>
      "return [typeof process, typeof require, typeof fetch, new Function('return typeof process')()]",
    check: resultIs(() => ['undefined', 'undefined', 'undefined', 'undefined']),
  },
  {
    name: 'user error',
    weight: 5,
    code: () => 'throw new TypeError("bad")',
    check: endsWith('RUNTIME'),
  },
  {
    name: 'module escape',
    weight: 3,
    code: () => "return require('child_process')",
    check: endsWith('RUNTIME'),
  },
  {
    name: 'sync loop',
    weight: 5,
    code: () => 'while (true) {}',
    limits: { timeoutMs: 150 },
    check: endsWith('TIMEOUT'),
  },
  {
    name: 'async loop',
    weight: 4,
    code: () => 'while (true) { await Promise.resolve(); }',
    limits: { timeoutMs: 150 },
    check: endsWith('TIMEOUT'),
  },
  {
    name: 'never settles',
    weight: 2,
    code: () => 'await new Promise(() => {})',
    limits: { timeoutMs: 150 },
    check: endsWith('TIMEOUT'),
  },
  {
    name: 'memory bomb',
    weight: 4,
    code: () => 'const a = []; while (true) a.push(new Array(1_000_000));',
    limits: { memoryMb: 8, timeoutMs: 2_000 },
    // Seed 000: OOM or TIMEOUT.
    check: endsWith('OOM', 'TIMEOUT'),
  },
  {
    name: 'request amplification',
    weight: 3,
    code: () => 'for (;;) await dataProxy.request({ i: 0 })',
    // 21 round trips to the host: on a loaded machine they can take a while.
    limits: { timeoutMs: 20_000 },
    check: endsWith('LIMIT_EXCEEDED'),
  },
  {
    name: 'result flooding',
    weight: 3,
    code: () => "return 'x'.repeat(64 * 1024)",
    limits: { maxResultBytes: 16 * 1024 },
    check: endsWith('VALIDATION'),
  },
  {
    name: 'console spam',
    weight: 3,
    code: () => 'for (let i = 0; i < 1_500; i++) console.log(i); return "spammed"',
    check: (events, i) => {
      expect(events.filter((event) => event.type === 'status')).toHaveLength(1_000);
      resultIs(() => 'spammed')(events, i);
    },
  },
  { name: 'code inflation', weight: 3, code: () => inflated, check: endsWith('VALIDATION') },
];

/** mulberry32: a small seeded generator, so the order of a run is fixed by its seed. */
export function seededRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

/** `count` cases drawn by weight, in a random order fixed by `seed`. */
export function drawCases(count: number, seed: number): SoakCase[] {
  const random = seededRandom(seed);
  const total = soakCases.reduce((sum, c) => sum + c.weight, 0);
  return Array.from({ length: count }, () => {
    let pick = random() * total;
    for (const c of soakCases) {
      pick -= c.weight;
      if (pick < 0) return c;
    }
    return soakCases[0]!;
  });
}

/**
 * How an execution ended when the engine's supervisor killed its worker process: CRASH (the
 * worker did not stop a timed-out execution, or did not confirm an abort, within 2 s), or OOM
 * (the worker crossed its resident-memory bound; every execution it held ends with OOM).
 * docs/isolate.md documents both; which execution shares a worker with which is up to the
 * engine, and on a starved machine the 2 s grace can run out, so a soak counts these instead of
 * predicting them. (Only the execution whose deadline caused the kill gets TIMEOUT; another one
 * the worker held that was past its own limit too gets CRASH.)
 */
export function isCollateral(event: SandboxEvent | undefined): boolean {
  if (event?.type !== 'error') return false;
  if (event.code === 'CRASH') {
    // Lost with a worker another execution killed, after it had reached the host (not rerun).
    if (event.details?.collateral === true) return true;
    return event.message.startsWith("The execution's worker process died:");
  }
  return (
    event.code === 'OOM' && /^The worker process used \d+ MiB, over its bound/.test(event.message)
  );
}

/** Whether `event` reports that the supervisor killed its worker (deadline or memory bound). */
export function killedItsWorker(event: SandboxEvent | undefined): boolean {
  if (event?.type !== 'error') return false;
  return (
    (event.code === 'TIMEOUT' && event.message.endsWith('did not stop it and was killed)')) ||
    (event.code === 'OOM' && event.message.endsWith('and was killed'))
  );
}
