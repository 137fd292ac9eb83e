// The egress proxy's cost when the network, not the CPU, is the limit (`node --conditions=@coda/source
// bench/egress-shaped.ts`, root only, not part of `pnpm bench`): the bench server runs in a
// network namespace of its own behind a veth pair rate-limited each way with tbf (BENCH_RATE,
// default 1gbit; tbf because the machine this was written on has no netem, so no added delay),
// the way a server on a fast LAN is reached. The same 100 MB download and 200 kept-alive small requests as bench/egress.ts,
// direct and through the proxy, interleaved round by round; medians. On loopback the relay
// competes with the server and the client for two cores; here it has the CPU to spare.
import { execFile, execFileSync, spawn } from 'node:child_process';
import { loadavg } from 'node:os';
import { promisify } from 'node:util';
import { EgressProxy } from '../src/egress/egress-proxy.ts';
import { createSandbox } from '../src/index.ts';

const run = promisify(execFile);
const rounds = Number(process.env.BENCH_ROUNDS ?? 5);
const rate = process.env.BENCH_RATE ?? '1gbit';
const names = {
  ns: `coda-bench-${process.pid}`,
  host: `cbh${process.pid % 100000}`,
  peer: `cbs${process.pid % 100000}`,
};
const hostAddress = '10.213.0.1';
const serverAddress = '10.213.0.2';
const ip = (...args: string[]): void => void execFileSync('ip', args, { stdio: 'ignore' });
const inNs = (...args: string[]): void => ip('netns', 'exec', names.ns, ...args);

ip('netns', 'add', names.ns);
let cleaned = false;
const cleanup = (): void => {
  if (cleaned) return;
  cleaned = true;
  try {
    ip('link', 'del', names.host);
  } catch {}
  try {
    ip('netns', 'del', names.ns);
  } catch {}
};
process.on('exit', cleanup);
ip('link', 'add', names.host, 'type', 'veth', 'peer', 'name', names.peer);
ip('link', 'set', names.peer, 'netns', names.ns);
ip('addr', 'add', `${hostAddress}/30`, 'dev', names.host);
ip('link', 'set', names.host, 'up');
inNs('ip', 'addr', 'add', `${serverAddress}/30`, 'dev', names.peer);
inNs('ip', 'link', 'set', names.peer, 'up');
inNs('ip', 'link', 'set', 'lo', 'up');
const shape = ['root', 'tbf', 'rate', rate, 'burst', '512kb', 'latency', '20ms'];
execFileSync('tc', ['qdisc', 'add', 'dev', names.host, ...shape]);
inNs('tc', 'qdisc', 'add', 'dev', names.peer, ...shape);

const serverSource = `
const chunk = Buffer.alloc(1024 * 1024, 0x61);
require('node:http').createServer((request, response) => {
  if (request.url === '/big') {
    response.setHeader('content-length', String(100 * chunk.length));
    let sent = 0;
    const pump = () => {
      while (sent < 100) { sent += 1; if (!response.write(chunk)) return void response.once('drain', pump); }
      response.end();
    };
    return pump();
  }
  response.end('ok');
}).listen(8080, '${serverAddress}', () => process.stdout.write('up\\n'));
`;
const server = spawn('ip', ['netns', 'exec', names.ns, process.execPath, '-e', serverSource], {
  stdio: ['ignore', 'pipe', 'inherit'],
});
await new Promise((resolve) => server.stdout.once('data', resolve));

const lookup = async () => [{ address: serverAddress, family: 4 }];
const policy = { allow: ['bench.test'], allowPrivate: true };
const proxy = new EgressProxy({ lookup });
const proxyUrl = `http://127.0.0.1:${((await proxy.openTcp(policy)).address as { port: number }).port}`;
const sandbox = createSandbox(
  { network: policy, allowFileWrites: false, timeoutMs: 120_000 },
  { lookup },
);

type Curl = (args: string[]) => Promise<string>;
const onHost: Curl = async (args) => (await run('curl', args, { maxBuffer: 1 << 20 })).stdout;
const inSandbox: Curl = async (args) => {
  const result = await sandbox.run('curl', args);
  if (!result.success) throw new Error(`sandboxed curl failed: ${result.stderr}`);
  return result.stdout;
};
const variants: { name: string; curl: Curl; flags: string[]; host: string }[] = [
  { name: 'direct (host curl)', curl: onHost, flags: [], host: serverAddress },
  {
    name: 'host curl → proxy, plain HTTP',
    curl: onHost,
    flags: ['-x', proxyUrl],
    host: 'bench.test',
  },
  {
    name: 'host curl → proxy, CONNECT',
    curl: onHost,
    flags: ['-p', '-x', proxyUrl],
    host: 'bench.test',
  },
  { name: 'sandboxed curl → proxy, plain HTTP', curl: inSandbox, flags: [], host: 'bench.test' },
  { name: 'sandboxed curl → proxy, CONNECT', curl: inSandbox, flags: ['-p'], host: 'bench.test' },
];
const download = (host: string) => [
  '-sS',
  '-o',
  '/dev/null',
  '-w',
  '%{speed_download}',
  `http://${host}:8080/big`,
];
const small = (host: string) => [
  '-sS',
  ...Array.from({ length: 200 }, () => [
    `http://${host}:8080/small`,
    '-o',
    '/dev/null',
    '-w',
    '%{time_total}\\n',
  ]).flat(),
];
const median = (values: readonly number[]): number =>
  [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] ?? Number.NaN;
const speeds = variants.map((): number[] => []);
const latencies = variants.map((): number[] => []);
const loads: number[] = [];
try {
  for (let round = 0; round < rounds; round += 1) {
    loads.push(loadavg()[0] ?? 0);
    for (const [index, variant] of variants.entries()) {
      speeds[index]?.push(
        Number(await variant.curl([...variant.flags, ...download(variant.host)])),
      );
      const text = await variant.curl([...variant.flags, ...small(variant.host)]);
      latencies[index]?.push(
        ...text
          .trim()
          .split('\n')
          .map((line) => Number(line) * 1000),
      );
    }
  }
} finally {
  await Promise.all([proxy.close(), sandbox.close()]);
  server.kill();
  cleanup();
}
const direct = median(speeds[0] ?? []);
const directLatency = median(latencies[0] ?? []);
console.log(`shaped veth: tbf rate ${rate} each way; medians of ${rounds} interleaved rounds`);
console.log(
  `load (1 min) at the rounds' starts ${loads.map((value) => value.toFixed(1)).join(' ')}`,
);
console.log('| path | 100 MB, MB/s | × direct | kept-alive p50, ms | added, ms |');
console.log('| --- | ---: | ---: | ---: | ---: |');
for (const [index, variant] of variants.entries()) {
  const speed = median(speeds[index] ?? []);
  const latency = median(latencies[index] ?? []);
  console.log(
    `| ${variant.name} | ${(speed / 1e6).toFixed(0)} | ${(speed / direct).toFixed(2)} | ${latency.toFixed(3)} | ${(latency - directLatency).toFixed(3)} |`,
  );
}
