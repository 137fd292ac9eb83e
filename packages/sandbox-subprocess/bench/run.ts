// p50 wall time of run('/bin/true') fully confined, against a bare spawn and a hand-written
// minimal bwrap invocation with the same namespaces, in one run (`pnpm bench`). The machine is
// shared and noisy, so the variants are interleaved round by round: load hits all of them alike.
// Interleaving also means each sandbox run comes after other work, as in a real host: moving a
// process into a cgroup right after a pause waits for an RCU grace period (~11 ms here), which
// back-to-back runs of one variant would hide. The `pause` variant makes that explicit.
import { spawn } from 'node:child_process';
import { cpus, loadavg, release } from 'node:os';
import { execa } from 'execa';
import { Bench } from 'tinybench';
import { buildSeccompFilter, createSandbox, resolveSubprocessPolicy } from '../src/index.ts';
import { type CheckedPath, releasePins } from '../src/linux/checked-path.ts';
import { bwrapArguments, runIdentity } from '../src/linux/linux-plan.ts';
import { prestartPoolOf } from '../src/linux/prestart-pool.ts';
import { prepareLaunch, releasePlan } from '../src/process/spawn-confined.ts';

const rounds = Number(process.env.BENCH_ROUNDS ?? 300);
const warmup = 20;

const confined = createSandbox({ allowNetwork: false, allowFileWrites: false, timeoutMs: 10_000 });
/** The same policy with its pre-started pool closed: every run takes the cold path. */
const confinedCold = createSandbox({
  allowNetwork: false,
  allowFileWrites: false,
  timeoutMs: 10_000,
});
await prestartPoolOf(confinedCold).close();
const withoutMemoryLimit = createSandbox({
  allowNetwork: false,
  allowFileWrites: false,
  timeoutMs: 10_000,
  maxMemoryMb: 0,
});
const disabled = createSandbox({ enabled: false });
/** The minimal form of a confined command, written by hand. */
const minimalForm = [
  '--ro-bind',
  '/',
  '/',
  '--dev',
  '/dev',
  '--proc',
  '/proc',
  '--tmpfs',
  '/tmp',
  '--unshare-all',
  '--die-with-parent',
  '--new-session',
  '--',
  '/bin/true',
];
const sameNamespaces = [
  '--unshare-user',
  '--unshare-pid',
  '--unshare-ipc',
  '--unshare-uts',
  '--unshare-net',
  '--new-session',
  '--die-with-parent',
  '--ro-bind',
  '/',
  '/',
  '--dev',
  '/dev',
  '--proc',
  '/proc',
  '--',
  '/bin/true',
];

// The same mounts and namespaces as the confined run, from the package's own bwrapArguments, run
// by hand: `bwrap OPTIONS -- COMMAND` on argv, no --args pipe, no wrapper shell, no cgroups, no
// rlimits, and the `--seccomp FD` pair dropped (no seccomp program). COMMAND is the package's,
// so for a root host it still includes setpriv and bash dropping to nobody before /bin/true.
const pins: CheckedPath[] = [];
const packageBwrap = (() => {
  const { request, plan } = prepareLaunch(
    {
      policy: resolveSubprocessPolicy({ allowNetwork: false, allowFileWrites: false }),
      onDegraded() {},
    },
    '/bin/true',
    [],
    {},
  );
  releasePlan(plan);
  const { options, command } = bwrapArguments(request, runIdentity(request.policy), [], true, pins);
  const seccomp = options.indexOf('--seccomp');
  if (seccomp >= 0) options.splice(seccomp, 2);
  return { options, command };
})();
const packageArgs = [...packageBwrap.options, '--', ...packageBwrap.command];
/** The same options, running /bin/true directly (no setpriv, no bash inside): what those cost. */
const packageArgsDirect = [...packageBwrap.options, '--', '/bin/true'];

/** With `startFd`, fd 5 is a pipe too: the package's command writes its start byte there. */
function spawnAndWait(file: string, args: readonly string[], startFd = false): Promise<void> {
  return new Promise((resolve, reject) => {
    const stdio = startFd
      ? (['ignore', 'pipe', 'pipe', 'ignore', 'ignore', 'pipe'] as const)
      : (['ignore', 'pipe', 'pipe'] as const);
    const child = spawn(file, args, { stdio: [...stdio] });
    child.stdout?.resume();
    child.stderr?.resume();
    child.once('error', reject);
    child.once('exit', (code) => (code === 0 ? resolve() : reject(new Error(`exit ${code}`))));
  });
}

async function expectSuccess(
  pending: Promise<{ success: boolean; error?: string | undefined }>,
): Promise<void> {
  const result = await pending;
  if (!result.success) throw new Error(result.error);
}

/** A variant resolves to its own measured milliseconds when it must exclude a set-up step. */
const variants: [string, () => Promise<unknown>][] = [
  ['bare execa spawn', async () => void (await execa('/bin/true'))],
  ['bare child_process.spawn', () => spawnAndWait('/bin/true', [])],
  [
    'hand-written bwrap, same namespaces (execa)',
    async () => void (await execa('/usr/bin/bwrap', sameNamespaces)),
  ],
  [
    'hand-written bwrap, same namespaces (child_process)',
    () => spawnAndWait('/usr/bin/bwrap', sameNamespaces),
  ],
  [
    'hand-written bwrap, minimal form (child_process)',
    () => spawnAndWait('/usr/bin/bwrap', minimalForm),
  ],
  [
    "hand-written bwrap, package's mounts and namespaces (child_process)",
    () => spawnAndWait('/usr/bin/bwrap', packageArgs, true),
  ],
  [
    "hand-written bwrap, package's mounts and namespaces, /bin/true without setpriv+bash",
    () => spawnAndWait('/usr/bin/bwrap', packageArgsDirect),
  ],
  [
    'sandbox.run, fully confined (pre-started sandbox)',
    () => expectSuccess(confined.run('/bin/true')),
  ],
  [
    'sandbox.run, fully confined, cold (pool closed)',
    () => expectSuccess(confinedCold.run('/bin/true')),
  ],
  [
    'sandbox.run, fully confined, after a 20 ms pause',
    async () => {
      await new Promise((resolve) => setTimeout(resolve, 20));
      const started = performance.now();
      await expectSuccess(confined.run('/bin/true'));
      return performance.now() - started;
    },
  ],
  [
    'sandbox.run, confined, no memory limit (pids cgroup only)',
    () => expectSuccess(withoutMemoryLimit.run('/bin/true')),
  ],
  ['sandbox.run, policy disabled', () => expectSuccess(disabled.run('/bin/true'))],
];

// Warm detection (bwrap probe, cgroup discovery) outside the measurement, as a long-lived host would.
const probe = await confined.run('/bin/true');
if (!probe.sandboxApplied) throw new Error(`bubblewrap did not apply: ${JSON.stringify(probe)}`);

const samples = new Map<string, number[]>(variants.map(([name]) => [name, []]));
for (let round = 0; round < rounds + warmup; round++) {
  for (const [name, task] of variants) {
    const started = performance.now();
    const own = await task();
    const elapsed = typeof own === 'number' ? own : performance.now() - started;
    if (round >= warmup) samples.get(name)!.push(elapsed);
  }
}

const quantile = (values: number[], q: number): number => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
};
const p50 = (name: string): number => quantile(samples.get(name)!, 0.5);

// CPU-only parts, with tinybench: building a seccomp program and resolving a policy.
const micro = new Bench({ time: 300 });
micro
  .add('buildSeccompFilter (allowlist)', () => void buildSeccompFilter({ allowNetwork: false }))
  .add(
    'resolveSubprocessPolicy',
    () => void resolveSubprocessPolicy({ timeoutMs: 1000, rlimits: { processes: 64 } }),
  );
await micro.run();
releasePins(pins);

console.log(
  `Machine: ${cpus().length} x ${cpus()[0]?.model.trim() ?? 'cpu'}, Linux ${release()}, Node ${process.versions.node}, load ${loadavg()[0]!.toFixed(1)}, ${rounds} interleaved rounds`,
);
console.log('\n| what | p50 ms | p90 ms |');
console.log('| --- | --- | --- |');
for (const [name] of variants) {
  console.log(
    `| ${name} | ${p50(name).toFixed(2)} | ${quantile(samples.get(name)!, 0.9).toFixed(2)} |`,
  );
}
for (const task of micro.tasks) {
  const result = task.result;
  if ('latency' in result)
    console.log(`| ${task.name} (CPU only) | ${(result.latency.p50 ?? Number.NaN).toFixed(4)} | |`);
}
const warmName = 'sandbox.run, fully confined (pre-started sandbox)';
const coldName = 'sandbox.run, fully confined, cold (pool closed)';
console.log('');
for (const [run, name, target] of [
  [warmName, 'hand-written bwrap, minimal form (child_process)', 1.3],
  [coldName, 'hand-written bwrap, minimal form (child_process)', 1.3],
  [warmName, "hand-written bwrap, package's mounts and namespaces (child_process)", 1.2],
  [coldName, "hand-written bwrap, package's mounts and namespaces (child_process)", 1.2],
] as const) {
  const ratio = p50(run) / p50(name);
  console.log(
    `${run} / ${name} (p50): ${ratio.toFixed(2)}x (target <= ${target}x: ${ratio <= target ? 'met' : 'NOT met'})`,
  );
}
console.log(
  'The pre-started pool refills in the background after each run, so each warm round finds a ready sandbox; the cold row is what a run pays when the pool is empty.',
);
console.log(
  `\npackage's baseline (--seccomp FD dropped, pinned paths as /proc/${process.pid}/fd/N):\n/usr/bin/bwrap ${packageArgs.map((arg) => JSON.stringify(arg)).join(' ')}`,
);
