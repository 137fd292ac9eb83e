// p50 wall time of the Landlock backend's run('/bin/true') against a bare spawn, in one run
// (`pnpm bench`), variants interleaved round by round as in run.ts. bubblewrap is kept off this
// process's PATH, so the probe chooses the Landlock backend (the one a container gets).
import { spawn } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { cpus, loadavg, release, tmpdir } from 'node:os';
import { join } from 'node:path';
import { createSandbox } from '../src/index.ts';

const rounds = Number(process.env.BENCH_ROUNDS ?? 300);
const warmup = 20;

const bin = mkdtempSync(join(tmpdir(), 'coda-bench-nobwrap-'));
chmodSync(bin, 0o755);
for (const tool of ['true', 'prlimit', 'setpriv']) symlinkSync(`/usr/bin/${tool}`, join(bin, tool));
process.env.PATH = bin;

const policy = { allowNetwork: false, allowFileWrites: false, timeoutMs: 10_000 } as const;
const landlock = createSandbox(policy);
const landlockNoMemory = createSandbox({ ...policy, maxMemoryMb: 0 });

function spawnAndWait(file: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(file, [], { stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout.resume();
    child.stderr.resume();
    child.once('error', reject);
    child.once('exit', (code) => (code === 0 ? resolve() : reject(new Error(`exit ${code}`))));
  });
}

async function expectLandlock(pending: ReturnType<typeof landlock.run>): Promise<void> {
  const result = await pending;
  if (!result.success || result.confinement !== 'landlock') {
    throw new Error(`not a Landlock run: ${result.confinement} ${result.error ?? ''}`);
  }
}

const variants: [string, () => Promise<void>][] = [
  ['bare child_process.spawn', () => spawnAndWait('/bin/true')],
  ['sandbox.run, Landlock backend', () => expectLandlock(landlock.run('/bin/true'))],
  [
    'sandbox.run, Landlock backend, no memory limit (pids cgroup only)',
    () => expectLandlock(landlockNoMemory.run('/bin/true')),
  ],
];

// The probes (bubblewrap refused, Landlock's ABI, the applier on /bin/true) outside the measurement.
await expectLandlock(landlock.run('/bin/true'));

const samples = new Map<string, number[]>(variants.map(([name]) => [name, []]));
for (let round = 0; round < rounds + warmup; round++) {
  for (const [name, task] of variants) {
    const started = performance.now();
    await task();
    if (round >= warmup) samples.get(name)!.push(performance.now() - started);
  }
}
rmSync(bin, { recursive: true, force: true });

const quantile = (values: number[], q: number): number => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
};
const p50 = (name: string): number => quantile(samples.get(name)!, 0.5);
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
const ratio = p50('sandbox.run, Landlock backend') / p50('bare child_process.spawn');
console.log(`\nLandlock backend / bare spawn (p50): ${ratio.toFixed(2)}x`);
