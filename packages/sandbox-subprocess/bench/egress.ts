// The egress proxy's cost, in one run (`node bench/egress.ts`, part of `pnpm bench`): a 100 MB
// download and 200 small requests with curl, (a) direct on the host, (b) on the host through the
// proxy's loopback TCP listener, (c) inside the sandbox through the forwarder, the Unix socket
// and the proxy. Times come from curl's own -w figures, so sandbox start-up is not in them.
import { execFile, spawn } from 'node:child_process';
import { cpus, loadavg } from 'node:os';
import { promisify } from 'node:util';
import { EgressProxy } from '../src/egress/egress-proxy.ts';
import { createSandbox } from '../src/index.ts';

const run = promisify(execFile);
const megabytes = 100;
const small = 200;
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
const smallArgs = (host: string) => [
  '-sS',
  ...Array.from({ length: small }, () => [
    `http://${host}:${port}/small`,
    '-o',
    '/dev/null',
    '-w',
    '%{time_total}\\n',
  ]).flat(),
];
const median = (values: number[]): number => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? Number.NaN;
};
const times = (text: string): number[] =>
  text
    .trim()
    .split('\n')
    .map((line) => Number(line) * 1000);

// (a) direct
const directSpeed = Number((await run('curl', downloadArgs('127.0.0.1'))).stdout);
const directSmall = times((await run('curl', smallArgs('127.0.0.1'))).stdout);

// (b) the proxy alone, over loopback TCP
const proxy = new EgressProxy({ lookup });
const listener = await proxy.openTcp(policy);
const proxyUrl = `http://127.0.0.1:${(listener.address as { port: number }).port}`;
const proxySpeed = Number(
  (await run('curl', ['-x', proxyUrl, ...downloadArgs('bench.test')])).stdout,
);
const proxySmall = times(
  (await run('curl', ['-x', proxyUrl, ...smallArgs('bench.test')], { maxBuffer: 1 << 20 })).stdout,
);
// The same through a CONNECT tunnel (how HTTPS goes; here without TLS, to measure the proxy).
const tunnelSpeed = Number(
  (await run('curl', ['-p', '-x', proxyUrl, ...downloadArgs('bench.test')])).stdout,
);
const tunnelSmall = times(
  (await run('curl', ['-p', '-x', proxyUrl, ...smallArgs('bench.test')], { maxBuffer: 1 << 20 }))
    .stdout,
);
await proxy.close();

// (c) inside the sandbox: forwarder + Unix socket + proxy
const sandbox = createSandbox(
  { network: policy, allowFileWrites: false, timeoutMs: 120_000 },
  { lookup },
);
const inside = await sandbox.run('curl', downloadArgs('bench.test'));
const insideSmall = await sandbox.run('curl', smallArgs('bench.test'));
if (!inside.success || !insideSmall.success)
  throw new Error(`sandboxed curl failed: ${inside.stderr} ${insideSmall.stderr}`);
const sandboxSpeed = Number(inside.stdout);
const insideTunnel = await sandbox.run('curl', ['-p', ...downloadArgs('bench.test')]);
const insideTunnelSmall = await sandbox.run('curl', ['-p', ...smallArgs('bench.test')]);
const sandboxTunnelSpeed = Number(insideTunnel.stdout);
const sandboxTunnelSmall = times(insideTunnelSmall.stdout);
const sandboxSmall = times(insideSmall.stdout);
await sandbox.close();
serverProcess.kill();

const mbps = (bytesPerSecond: number): string => (bytesPerSecond / 1e6).toFixed(0);
const rows = [
  ['direct (host curl)', directSpeed, directSmall],
  ['host curl → proxy (TCP)', proxySpeed, proxySmall],
  ['host curl → proxy (TCP), CONNECT tunnel', tunnelSpeed, tunnelSmall],
  ['sandboxed curl → forwarder → proxy', sandboxSpeed, sandboxSmall],
  ['sandboxed curl → forwarder → proxy, CONNECT tunnel', sandboxTunnelSpeed, sandboxTunnelSmall],
] as const;
console.log(
  `egress proxy, ${megabytes} MB download and ${small} small requests (keep-alive), one run`,
);
console.log(
  `${cpus().length} cores, load ${loadavg()
    .map((value) => value.toFixed(1))
    .join(' ')}`,
);
console.log('| path | 100 MB, MB/s | × direct | small request p50, ms | added p50, ms |');
console.log('| --- | ---: | ---: | ---: | ---: |');
for (const [name, speed, samples] of rows) {
  console.log(
    `| ${name} | ${mbps(speed)} | ${(speed / directSpeed).toFixed(2)} | ${median(samples).toFixed(3)} | ${(median(samples) - median(directSmall)).toFixed(3)} |`,
  );
}
