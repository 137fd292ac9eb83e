// Rate-limit checks per second and latency at 50 concurrent callers, against the same local
// Redis in the same run: this package's guard (and its store alone) versus rate-limiter-flexible's
// RateLimiterRedis. Also counts the commands each check sends, with MONITOR.
// Usage: pnpm bench (starts its own redis-server; REDIS_URL uses an existing one instead).
import { cpus, loadavg, totalmem } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { RateLimiterRedis } from 'rate-limiter-flexible';
import { Bench } from 'tinybench';
import { createRateLimitGuard, createRedisLimitStore, fromIoredis } from '../src/index.ts';
import { type RedisProcess, startRedis } from '../test/redis-servers.ts';

const callers = 50;
const rounds = Number(process.env.BENCH_ROUNDS ?? 7);
const timeMs = Number(process.env.BENCH_TIME_MS ?? 2_000);

let server: RedisProcess | undefined;
let target: { host: string; port: number };
if (process.env.REDIS_URL) {
  const url = new URL(process.env.REDIS_URL);
  target = { host: url.hostname, port: Number(url.port || 6379) };
} else {
  server = await startRedis();
  target = { host: '127.0.0.1', port: server.port };
}

// BENCH_AUTOPIPELINING=1 gives every client (both sides) ioredis's automatic pipelining.
const enableAutoPipelining = process.env.BENCH_AUTOPIPELINING === '1';
const connect = async () => {
  const client = new Redis({ ...target, maxRetriesPerRequest: 1, enableAutoPipelining });
  await client.ping();
  return client;
};
const clients: Redis[] = [];
const client = async () => {
  const made = await connect();
  clients.push(made);
  return made;
};
const admin = await client();
const prefix = `bench:${Date.now()}:`;
// A loaded machine can stall a command past the 1 s default; this measures speed, not outages.
const patient = { timeoutMs: 30_000 } as const;

/** One scenario: contenders (each on its own connection) checked in the same run. */
interface Scenario {
  title: string;
  note: string;
  baseline: string;
  contenders: Record<string, () => Promise<unknown>>;
}

let sequence = 0;

/** (a) Limits high enough that every check is admitted: both sides take their write path. */
async function mostlyAdmitted(): Promise<Scenario> {
  const users = 1_000;
  const nextUser = () => `user-${sequence++ % users}`;
  const guard = createRateLimitGuard({
    ...patient,
    store: createRedisLimitStore({ client: fromIoredis(await client()), keyPrefix: `${prefix}a:` }),
    limit: 1_000_000,
    windowMs: 60_000,
  });
  const store = createRedisLimitStore({
    client: fromIoredis(await client()),
    keyPrefix: `${prefix}as:`,
  });
  const rule = { limit: 1_000_000, windowMs: 60_000, burst: 1_000_000 };
  const flexible = new RateLimiterRedis({
    storeClient: await client(),
    keyPrefix: `${prefix}arlf`,
    points: 1_000_000,
    duration: 60,
  });
  return {
    title: '(a) Mostly admitted',
    note: `${users} users, 1 000 000 checks per 60 s each: every check is admitted.`,
    baseline: 'rate-limiter-flexible RateLimiterRedis',
    contenders: {
      'sandbox-limits-redis guard': () =>
        guard.acquire({ executionId: String(sequence), userId: nextUser() }),
      'sandbox-limits-redis store only': () => store.rateLimit(`rate:{=${nextUser()}}`, rule),
      'rate-limiter-flexible RateLimiterRedis': () => flexible.consume(nextUser()),
    },
  };
}

/**
 * (b) Hammering: 100 users already over a limit of 10 per minute send 90 % of the checks; the
 * other 10 % come from users seen for the first time (admitted).
 */
async function hammering(): Promise<Scenario> {
  const hot = 100;
  const limit = 10;
  const nextUser = () => {
    const n = sequence++;
    return n % 10 === 9 ? `fresh-${n}` : `hot-${n % hot}`;
  };
  const guard = createRateLimitGuard({
    ...patient,
    store: createRedisLimitStore({ client: fromIoredis(await client()), keyPrefix: `${prefix}b:` }),
    limit,
    windowMs: 60_000,
  });
  const flexible = (name: string, block: boolean) =>
    client().then(
      (storeClient) =>
        new RateLimiterRedis({
          storeClient,
          keyPrefix: `${prefix}${name}`,
          points: limit,
          duration: 60,
          // Blocked in this process once over the limit, until the window ends.
          ...(block ? { inMemoryBlockOnConsumed: limit + 1 } : {}),
        }),
    );
  const [plain, blocking] = await Promise.all([flexible('brlf', false), flexible('brlfb', true)]);
  const contenders: Record<string, () => Promise<unknown>> = {
    'sandbox-limits-redis guard': () =>
      guard.acquire({ executionId: String(sequence), userId: nextUser() }).catch(refused),
    'rate-limiter-flexible RateLimiterRedis': () => plain.consume(nextUser()).catch(refused),
    'rate-limiter-flexible RateLimiterRedis, inMemoryBlockOnConsumed': () =>
      blocking.consume(nextUser()).catch(refused),
  };
  // Every hot user over the limit on every contender before anything is timed.
  for (const check of [
    (user: string) => guard.acquire({ executionId: 'warm', userId: user }),
    (user: string) => plain.consume(user),
    (user: string) => blocking.consume(user),
  ]) {
    for (let user = 0; user < hot; user++) {
      for (let i = 0; i <= limit; i++) await check(`hot-${user}`).catch(refused);
    }
  }
  return {
    title: '(b) Hammering',
    note: `${hot} users over a limit of ${limit} per 60 s send 90 % of the checks (refused); 10 % come from new users (admitted).`,
    baseline: 'rate-limiter-flexible RateLimiterRedis',
    contenders,
  };
}

/** A refusal is the expected outcome here; anything else is a broken benchmark. */
function refused(error: unknown): void {
  const code = (error as { code?: unknown }).code;
  const isFlexibleRefusal = typeof error === 'object' && error !== null && 'msBeforeNext' in error;
  if (code !== 'RATE_LIMITED' && !isFlexibleRefusal) throw error;
}

/**
 * Commands the server received per check (MONITOR, leaving out those scripts run inside), over
 * `checks` checks made by `callers` loops as in the measurement.
 */
async function commandsPerCheck(check: () => Promise<unknown>, checks = 10_000): Promise<string> {
  for (let i = 0; i < 20; i++) await check(); // scripts cached first
  const watcher = new Redis(target);
  const monitor = await watcher.monitor();
  const seen = new Map<string, number>();
  monitor.on('monitor', (_time: string, args: string[], source: string) => {
    if (source === 'lua') return;
    const name = args[0]!.toLowerCase();
    seen.set(name, (seen.get(name) ?? 0) + 1);
  });
  let left = checks;
  await Promise.all(
    Array.from({ length: callers }, async () => {
      while (left-- > 0) await check();
    }),
  );
  await sleep(200);
  monitor.disconnect();
  watcher.disconnect();
  return [...seen].map(([name, count]) => `${(count / checks).toFixed(2)} ${name}`).join(', ');
}

interface Figures {
  throughput: number;
  p50: number;
  p99: number;
  /** CPU time of this process per check, µs. */
  clientCpu: number;
  /** CPU time of redis-server per check, µs. */
  serverCpu: number;
}

/** redis-server's CPU time so far, in µs (INFO cpu). */
async function serverCpuMicros(): Promise<number> {
  const info = await admin.info('cpu');
  const field = (name: string) => Number(new RegExp(`${name}:([\\d.]+)`).exec(info)?.[1] ?? 0);
  return (field('used_cpu_sys') + field('used_cpu_user')) * 1e6;
}

/** `callers` async loops calling `check` back to back for `timeMs`; every latency kept. */
async function measure(check: () => Promise<unknown>): Promise<Figures> {
  for (let i = 0; i < 2_000; i++) await check();
  const latencies = new Float64Array(2_000_000);
  let count = 0;
  const cpuBefore = process.cpuUsage();
  const serverBefore = await serverCpuMicros();
  const started = performance.now();
  const until = started + timeMs;
  await Promise.all(
    Array.from({ length: callers }, async () => {
      for (let now = performance.now(); now < until && count < latencies.length; ) {
        await check();
        const done = performance.now();
        latencies[count++] = done - now;
        now = done;
      }
    }),
  );
  const elapsed = performance.now() - started;
  const cpu = process.cpuUsage(cpuBefore);
  const serverCpu = (await serverCpuMicros()) - serverBefore;
  const sorted = latencies.subarray(0, count).sort();
  return {
    throughput: count / (elapsed / 1_000),
    p50: sorted[Math.floor(count * 0.5)]!,
    p99: sorted[Math.floor(count * 0.99)]!,
    clientCpu: (cpu.user + cpu.system) / count,
    serverCpu: serverCpu / count,
  };
}

/** One caller, one check at a time (tinybench): the latency of a check with nothing queued. */
async function sequentialLatency(
  contenders: Scenario['contenders'],
): Promise<Record<string, { p50: number; p99: number }>> {
  const bench = new Bench({ time: Math.min(timeMs, 1_000), warmupTime: 200 });
  for (const [name, check] of Object.entries(contenders)) bench.add(name, check);
  await bench.run();
  return Object.fromEntries(
    bench.tasks.map((task) => {
      const result = task.result;
      if (result.state !== 'completed') throw new Error(`${task.name}: ${result.state}`);
      return [task.name, { p50: result.latency.p50, p99: result.latency.p99 }];
    }),
  );
}

// Each row is one round of its contender, the round with the median throughput: its figures
// belong together (medians taken field by field could mix rounds).
const medianRound = (figures: Figures[]) =>
  [...figures].sort((a, b) => a.throughput - b.throughput)[Math.floor(figures.length / 2)]!;

async function report(scenario: Scenario): Promise<void> {
  const rows: Record<string, Figures[]> = {};
  for (let round = 0; round < rounds; round++) {
    // Alternate the order each round so background load hits every contender alike.
    const names = Object.keys(scenario.contenders);
    if (round % 2 === 1) names.reverse();
    for (const name of names) {
      rows[name] ??= [];
      const figures = await measure(scenario.contenders[name]!);
      rows[name].push(figures);
      if (process.env.BENCH_VERBOSE) console.log(round, name, JSON.stringify(figures));
    }
  }
  const commands: Record<string, string> = {};
  for (const [name, check] of Object.entries(scenario.contenders)) {
    commands[name] = await commandsPerCheck(check);
  }
  const baseline = medianRound(rows[scenario.baseline]!).throughput;
  console.log(`\n${scenario.title}: ${scenario.note}\n`);
  console.log(
    '| contender | checks/s | vs RateLimiterRedis | p50 ms | p99 ms | client CPU µs/check | Redis CPU µs/check | commands per check |',
  );
  console.log('| --- | --- | --- | --- | --- | --- | --- | --- |');
  for (const [name, figures] of Object.entries(rows)) {
    const row = medianRound(figures);
    console.log(
      `| ${name} | ${Math.round(row.throughput)} | ${(row.throughput / baseline).toFixed(2)}× | ${row.p50.toFixed(2)} | ${row.p99.toFixed(2)} | ${row.clientCpu.toFixed(1)} | ${row.serverCpu.toFixed(1)} | ${commands[name] || 'none'} |`,
    );
  }
}

const redisVersion = /redis_version:(\S+)/.exec(await admin.info('server'))?.[1];
console.log(
  `\nMachine: ${cpus()[0]?.model} × ${cpus().length}, ${Math.round(totalmem() / 2 ** 30)} GiB, load average ${loadavg()
    .map((load) => load.toFixed(1))
    .join(' ')}, Node ${process.version}, Redis ${redisVersion} (local, TCP)`,
);
console.log(
  `${callers} concurrent callers, ${rounds} rounds of ${timeMs} ms, each contender's median round. ioredis auto-pipelining ${enableAutoPipelining ? 'on' : 'off'}.`,
);
const only = process.env.BENCH_SCENARIO;
if (only === undefined || only === 'a') {
  const scenario = await mostlyAdmitted();
  await report(scenario);
  console.log('\nOne caller, one check at a time (tinybench):\n');
  console.log('| contender | p50 ms | p99 ms |');
  console.log('| --- | --- | --- |');
  for (const [name, figures] of Object.entries(await sequentialLatency(scenario.contenders))) {
    console.log(`| ${name} | ${figures.p50.toFixed(3)} | ${figures.p99.toFixed(3)} |`);
  }
}
if (only === undefined || only === 'b') await report(await hammering());

await Promise.all(clients.map((each) => each.quit()));
await server?.stop();
