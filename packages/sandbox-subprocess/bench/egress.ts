// The egress proxy's cost, in one run (`node bench/egress.ts`, part of `pnpm bench`): a 100 MB
// download, 200 small requests on one kept-alive connection and 50 small requests on a new
// connection each, with curl, (a) direct on the host, (b) on the host through the proxy's
// loopback TCP listener (plain HTTP forwarding; CONNECT tunnels with the bytes moved by Node and
// by the host-side splice relay), (c) inside the sandbox through the forwarder and the proxy:
// the client socket passed to the host (the default), and relayed over the Unix socket by the
// forwarder (`egressForwarding: 'relay'`, the way before connections were passed), and (d) inside
// the sandbox with `allowNetwork: true`, the direct figure for a sandboxed command; and (e) the
// same download over HTTPS, direct and through CONNECT from the host and from a sandbox, each set
// against HTTPS direct. The variants are interleaved round by round (the machine is shared: load
// hits all of them alike); medians over the rounds, and the requests' p90. Times come from
// curl's own -w figures, so sandbox start-up is not in them.
import { execFile, spawn } from 'node:child_process';
import { cpus, loadavg } from 'node:os';
import { promisify } from 'node:util';
import { EgressProxy } from '../src/egress/egress-proxy.ts';
import { createSandbox } from '../src/index.ts';
import { makeCertificate } from '../test/support/egress-servers.ts';

const run = promisify(execFile);
const rounds = Number(process.env.BENCH_ROUNDS ?? 5);
const megabytes = 100;
const small = 200;
const fresh = 50;
// The server runs in a process of its own, as a remote server would: it does not share the
// proxy's event loop. It answers plain HTTP on one port and HTTPS (a self-signed certificate for
// bench.test) on another: a real download through the proxy is HTTPS, and the tunnel then
// carries what both ends spend on TLS.
const certificate = makeCertificate(['bench.test']);
const serverSource = `
const chunk = Buffer.alloc(1024 * 1024, 0x61);
const handler = (request, response) => {
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
};
const plain = require('node:http').createServer(handler);
const secure = require('node:https').createServer(${JSON.stringify(certificate)}, handler);
plain.listen(0, '127.0.0.1', () => secure.listen(0, '127.0.0.1', () =>
  process.stdout.write(plain.address().port + ' ' + secure.address().port + '\\n')));
`;
const serverProcess = spawn(process.execPath, ['-e', serverSource], {
  stdio: ['ignore', 'pipe', 'inherit'],
});
const [port, tlsPort] = await new Promise<number[]>((resolve) =>
  serverProcess.stdout.once('data', (data) => resolve(String(data).trim().split(' ').map(Number))),
);
const lookup = async () => [{ address: '127.0.0.1', family: 4 }];
const policy = { allow: ['bench.test'], allowPrivate: true };

// The HTTPS rows skip certificate verification (-k): the name still goes out as SNI, which the
// proxy checks, and what is measured is the bytes, not the trust store.
const urlOf = (host: string, tls: boolean, path: string): string =>
  tls ? `https://${host}:${tlsPort}${path}` : `http://${host}:${port}${path}`;
const downloadArgs = (host: string, tls: boolean) => [
  '-sS',
  '-o',
  '/dev/null',
  '-w',
  '%{speed_download}',
  urlOf(host, tls, '/big'),
];
const requestsArgs = (host: string, tls: boolean, count: number, close: boolean) => [
  '-sS',
  ...(close ? ['-H', 'Connection: close'] : []),
  ...Array.from({ length: count }, () => [
    urlOf(host, tls, '/small'),
    '-o',
    '/dev/null',
    '-w',
    '%{time_total}\\n',
  ]).flat(),
];
const quantile = (values: readonly number[], fraction: number): number => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length * fraction)] ?? Number.NaN;
};
const median = (values: readonly number[]): number => quantile(values, 0.5);
// The p90 of the requests too: a stall that hits some requests only (a 40 ms delayed ACK on
// every other new HTTPS connection, before TCP_NODELAY) leaves the p50 as it was.
const p90 = (values: readonly number[]): number => quantile(values, 0.9);
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
  /** Whether it downloads over HTTPS (through the proxy: a CONNECT tunnel with the SNI check). */
  readonly tls?: boolean;
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
  {
    name: 'HTTPS direct (host curl)',
    curl: onHost,
    flags: ['-k', '--resolve', `bench.test:${tlsPort}:127.0.0.1`],
    host: 'bench.test',
    tls: true,
  },
  {
    name: 'HTTPS, host curl → proxy (TCP), CONNECT, splice relay',
    curl: onHost,
    flags: ['-k', '-x', spliceUrl],
    host: 'bench.test',
    tls: true,
  },
  {
    name: 'HTTPS, sandboxed curl → forwarder passes the socket → proxy, CONNECT',
    curl: inSandbox,
    flags: ['-k'],
    host: 'bench.test',
    tls: true,
  },
];

const speeds = variants.map((): number[] => []);
const kept = variants.map((): number[] => []);
const opened = variants.map((): number[] => []);
const loads: number[] = [];
for (let round = 0; round < rounds; round += 1) {
  loads.push(loadavg()[0] ?? 0);
  for (const [index, variant] of variants.entries()) {
    const { curl, flags, host, tls = false } = variant;
    speeds[index]?.push(Number(await curl([...flags, ...downloadArgs(host, tls)])));
    kept[index]?.push(...times(await curl([...flags, ...requestsArgs(host, tls, small, false)])));
    opened[index]?.push(...times(await curl([...flags, ...requestsArgs(host, tls, fresh, true)])));
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
// Each row is set against the direct row of its own scheme: the first row of each is direct.
const directOf = (variant: Variant): number =>
  variants.findIndex((other) => (other.tls ?? false) === (variant.tls ?? false));
console.log(
  `egress proxy: ${megabytes} MB download, ${small} small requests on one kept-alive connection, ${fresh} on a new connection each; medians of ${rounds} interleaved rounds`,
);
console.log(
  `${cpus().length} cores, load (1 min) at the rounds' starts ${loads.map((value) => value.toFixed(1)).join(' ')}`,
);
console.log(
  '| path | 100 MB, MB/s | × direct (same scheme) | kept-alive p50, ms | added, ms | p90, ms | new connection p50, ms | added, ms | p90, ms |',
);
console.log('| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |');
for (const [index, variant] of variants.entries()) {
  const direct = directOf(variant);
  const speed = median(speeds[index] ?? []);
  const keptMedian = median(kept[index] ?? []);
  const openedMedian = median(opened[index] ?? []);
  const directSpeed = median(speeds[direct] ?? []);
  const directKept = median(kept[direct] ?? []);
  const directOpened = median(opened[direct] ?? []);
  console.log(
    `| ${variant.name} | ${mbps(speed)} | ${(speed / directSpeed).toFixed(2)} | ${keptMedian.toFixed(3)} | ${(keptMedian - directKept).toFixed(3)} | ${p90(kept[index] ?? []).toFixed(3)} | ${openedMedian.toFixed(3)} | ${(openedMedian - directOpened).toFixed(3)} | ${p90(opened[index] ?? []).toFixed(3)} |`,
  );
}
