// Commands an attacker might get an agent to run, against the subprocess sandbox.
import type { SandboxResult } from '@coda/sandbox-subprocess';
import { connectScript, listenOnLoopback } from '../sample-data/loopback-listener.ts';
import type { AttackCase, AttackResult } from './attack-case.ts';

/** What ended a command, in the table's words; says so when OS confinement was missing. */
function ending(result: SandboxResult): string {
  const degraded = result.sandboxApplied ? '' : ' (degraded: no OS confinement here)';
  if (result.timedOut) return `TIMEOUT${degraded}`;
  if (result.memoryExceeded) return `OOM${degraded}`;
  if (result.signal !== null) return `${result.signal}${degraded}`;
  return `exit ${result.exitCode}${degraded}`;
}

/** Commands that try to phone home, burn CPU, and eat memory. */
export const subprocessAttackCases: readonly AttackCase[] = [
  {
    attack: 'network exfiltration (command)',
    layer: 'subprocess',
    async run(resources) {
      const listener = await listenOnLoopback();
      try {
        const result = await resources
          .subprocessSandbox()
          .run(process.execPath, ['-e', connectScript(listener.port)]);
        const reached = listener.connections > 0;
        return {
          contained: !reached && !result.success,
          outcome: reached
            ? 'connection arrived'
            : `no connection (${result.stdout.trim() || ending(result)})`,
        } satisfies AttackResult;
      } finally {
        await listener.close();
      }
    },
  },
  {
    attack: 'CPU exhaustion (command)',
    layer: 'subprocess',
    async run(resources) {
      const result = await resources
        .subprocessSandbox()
        .run('/bin/sh', ['-c', 'while :; do :; done'], { timeoutMs: 1_000 });
      return { contained: result.timedOut, outcome: ending(result) };
    },
  },
  {
    attack: 'memory exhaustion (command)',
    layer: 'subprocess',
    async run(resources) {
      const bomb = 'const a = []; for (;;) a.push(Buffer.alloc(1 << 24, 1));';
      const result = await resources
        .subprocessSandbox()
        .run(process.execPath, ['-e', bomb], { maxMemoryMb: 128, timeoutMs: 10_000 });
      return { contained: !result.success && !result.timedOut, outcome: ending(result) };
    },
  },
];
