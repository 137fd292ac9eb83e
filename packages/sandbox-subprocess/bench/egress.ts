// The egress proxy's cost, in one run (`node bench/egress.ts`, part of `pnpm bench`): a 100 MB
// download, 200 small requests on one kept-alive connection and 50 small requests on a new
// connection each, with curl, (a) direct on the host, (b) on the host through the proxy's
// loopback TCP listener (plain HTTP forwarding; CONNECT tunnels with the bytes moved by Node and
// by the host-side splice relay), (c) inside the sandbox through the forwarder and the proxy:
// the client socket passed to the host (the default), and relayed over the Unix socket by the
// forwarder (`egressForwarding: 'relay'`, the way before connections were passed), and (d) inside
// the sandbox with `allowNetwork: true`, the direct figure for a sandboxed command. The variants
// are interleaved round by round (the machine is shared: load hits all of them alike); medians
// over the rounds. Times come from curl's own -w figures, so sandbox start-up is not in them.
import { execFile, spawn } from 'node:child_process';
import { cpus, loadavg } from 'node:os';
import { promisify } from 'node:util';
import { EgressProxy } from '../src/egress/egress-proxy.ts';
import { createSandbox } from '../src/index.ts';

const run = promisify(execFile);
const rounds = Number(process.env.BENCH_ROUNDS ?? 5);
const megabytes = 100;
const small = 200;
const fresh = 50;
// The server runs in a process of its own, as a remote server would: it does not share the
// proxy's event loop.
const serverSource = `
const chunk = Buffer.alloc(1024 * 1024, 0x61);
const server = require('node:http').createServer((request, response) => {
  if (request.url === '/big') {
    response.setHeader('content-length', String(${megabytes} * chunk.length));
    let sent = 0;
    const pump = () => {
      while (sent < ${megabytes}) { sent += 1; if (!response.write(chunk)) return void response.once('drain', pump); }
      response.end();
    };
    return pump();
  }
  response.end('ok');
});
server.listen(0, '127.0.0.1', () => process.stdout.write(String(server.address().port) + '\\n'));
`;
const serverProcess = spawn(process.execPath, ['-e', serverSource], {
  stdio: ['ignore', 'pipe', 'inherit'],
});
const port = await new Promise<number>((resolve) =>
  serverProcess.stdout.once('data', (data) => resolve(Number(String(data).trim()))),
);
const lookup = async () => [{ address: '127.0.0.1', family: 4 }];
const policy = { allow: ['bench.test'], allowPrivate: true };

const downloadArgs = (host: string) => [
  '-sS',
  '-o',
  '/dev/null',
  '-w',
  '%{speed_download}',
  `http://${host}:${port}/big`,
];
const requestsArgs = (host: string, count: number, close: boolean) => [
  '-sS',
  ...(close ? ['-H', 'Connection: close'] : []),
  ...Array.from({ length: count }, () => [
    `http://${host}:${port}/small`,
    '-o',
    '/dev/null',
    '-w',
    '%{time_total}\\n',
  ]).flat(),
];
const median = (values: readonly number[]): number => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? Number.NaN;
};
const times = (text: string): number[] =>
  text
    .trim()
    .split('\n')
    .map((line) => Number(line) * 1000);

/** Runs curl with `args` and returns its stdout. */
type Curl = (args: string[]) => Promise<string>;

const onHost: Curl = async (args) => (await run('curl', args, { maxBuffer: 1 << 20 })).stdout;
const nodeProxy = new EgressProxy({ lookup, tunnelRelay: 'node' });
const spliceProxy = new EgressProxy({ lookup, tunnelRelay: 'splice' });
const nodeUrl = `http://127.0.0.1:${((await nodeProxy.openTcp(policy)).address as { port: number }).port}`;
const spliceUrl = `http://127.0.0.1:${((await spliceProxy.openTcp(policy)).address as { port: number }).port}`;
const sandboxPolicy = { network: policy, allowFileWrites: false, timeoutMs: 120_000 };
const sandbox = createSandbox(sandboxPolicy, { lookup });
const relayingSandbox = createSandbox(sandboxPolicy, { lookup, egressForwarding: 'relay' });
const curlIn =
  (where: typeof sandbox): Curl =>
  async (args) => {
    const result = await where.run('curl', args);
    if (!result.success) throw new Error(`sandboxed curl failed: ${result.stderr}`);
    return result.stdout;
  };
const inSandbox = curlIn(sandbox);
// The sandboxed direct row: the same confinement with the host's network (no proxy), the
// baseline a sandboxed command gives up by taking the allowlist instead of allowNetwork: true.
const openSandbox = createSandbox({
  allowNetwork: true,
  allowFileWrites: false,
  timeoutMs: 120_000,
});
const relayedInSandbox = curlIn(relayingSandbox);

/** One row: how curl is run, with which extra arguments, to which host name. */
interface Variant {
  readonly name: string;
  readonly curl: Curl;
  readonly flags: readonly string[];
  readonly host: string;
}
const variants: readonly Variant[] = [
  { name: 'direct (host curl)', curl: onHost, flags: [], host: '127.0.0.1' },
  {
    name: 'sandboxed curl, allowNetwork: true (no proxy)',
    curl: curlIn(openSandbox),
    flags: [],
    host: '127.0.0.1',
  },
  { name: 'host curl → proxy (TCP)', curl: onHost, flags: ['-x', spliceUrl], host: 'bench.test' },
  {
    name: 'host curl → proxy (TCP), CONNECT, Node relay',
    curl: onHost,
    flags: ['-p', '-x', nodeUrl],
    host: 'bench.test',
  },
  {
    name: 'host curl → proxy (TCP), CONNECT, splice relay',
    curl: onHost,
    flags: ['-p', '-x', spliceUrl],
    host: 'bench.test',
  },
  {
    name: 'sandboxed curl → forwarder relays → proxy',
    curl: relayedInSandbox,
    flags: [],
    host: 'bench.test',
  },
  {
    name: 'sandboxed curl → forwarder passes the socket → proxy',
    curl: inSandbox,
    flags: [],
    host: 'bench.test',
  },
  {
    name: 'sandboxed curl → forwarder relays → proxy, CONNECT (splice both)',
    curl: relayedInSandbox,
    flags: ['-p'],
    host: 'bench.test',
  },
  {
    name: 'sandboxed curl → forwarder passes the socket → proxy, CONNECT (one splice relay)',
    curl: inSandbox,
    flags: ['-p'],
    host: 'bench.test',
  },
];

const speeds = variants.map((): number[] => []);
const kept = variants.map((): number[] => []);
const opened = variants.map((): number[] => []);
const loads: number[] = [];
for (let round = 0; round < rounds; round += 1) {
  loads.push(loadavg()[0] ?? 0);
  for (const [index, variant] of variants.entries()) {
    const { curl, flags, host } = variant;
    speeds[index]?.push(Number(await curl([...flags, ...downloadArgs(host)])));
    kept[index]?.push(...times(await curl([...flags, ...requestsArgs(host, small, false)])));
    opened[index]?.push(...times(await curl([...flags, ...requestsArgs(host, fresh, true)])));
  }
}
await Promise.all([
  nodeProxy.close(),
  spliceProxy.close(),
  sandbox.close(),
  relayingSandbox.close(),
  openSandbox.close(),
]);
serverProcess.kill();

const mbps = (bytesPerSecond: number): string => (bytesPerSecond / 1e6).toFixed(0);
const directSpeed = median(speeds[0] ?? []);
const directKept = median(kept[0] ?? []);
const directOpened = median(opened[0] ?? []);
console.log(
  `egress proxy: ${megabytes} MB download, ${small} small requests on one kept-alive connection, ${fresh} on a new connection each; medians of ${rounds} interleaved rounds`,
);
console.log(
  `${cpus().length} cores, load (1 min) at the rounds' starts ${loads.map((value) => value.toFixed(1)).join(' ')}`,
);
console.log(
  '| path | 100 MB, MB/s | × direct | kept-alive p50, ms | added, ms | new connection p50, ms | added, ms |',
);
console.log('| --- | ---: | ---: | ---: | ---: | ---: | ---: |');
for (const [index, variant] of variants.entries()) {
  const speed = median(speeds[index] ?? []);
  const keptMedian = median(kept[index] ?? []);
  const openedMedian = median(opened[index] ?? []);
  console.log(
    `| ${variant.name} | ${mbps(speed)} | ${(speed / directSpeed).toFixed(2)} | ${keptMedian.toFixed(3)} | ${(keptMedian - directKept).toFixed(3)} | ${openedMedian.toFixed(3)} | ${(openedMedian - directOpened).toFixed(3)} |`,
  );
}
