// A network allowlist on the Landlock backend (bubblewrap refused, as in a container whose
// seccomp profile refuses user namespaces): the run keeps the host's network stack, Landlock
// (ABI 4 or later) refuses every TCP bind and every connect but to the egress proxy's loopback
// port, and seccomp keeps to TCP client sockets. Real curl, node and python3 against servers
// the test starts; what is expected comes from the kernel's documented errors (EACCES from
// Landlock, EPERM from seccomp) and the proxy's report format, never from the code.
import { createSocket } from 'node:dgram';
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { NetworkEvent, SandboxUnavailableError } from '@coda/sandbox-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSandbox, SandboxControl, type SubprocessSandbox } from '../src/index.ts';
import { hostPaths } from '../src/linux/host-paths.ts';
import { landlockArguments } from '../src/linux/landlock/landlock-plan.ts';
import {
  makeCertificate,
  randomLoopback,
  startHttp,
  startHttps,
  type TestServer,
  tableLookup,
} from './support/egress-servers.ts';
import { publicNode } from './support/environments.ts';
import { pathWithBwrap, removeFakeBwraps } from './support/fake-bwrap.ts';
import { python } from './support/helpers.ts';
import { launchRequest } from './support/launch-request.ts';

const body = 'hello from api.test\n';
/** By path: the test's PATH holds only the refusing bwrap. */
const curl = '/usr/bin/curl';
const hostPath = process.env.PATH;
let http: TestServer;
let https: TestServer;
let caFile: string;
let files: string;
let sandbox: SubprocessSandbox;

/** A TCP server counting the connections and bytes it gets (a direct connect must add none). */
interface Counting {
  readonly port: number;
  readonly address: string;
  accepted: number;
  received: string;
  readonly server: Server;
}

async function counting(address = '127.0.0.1', port = 0): Promise<Counting> {
  const state = { accepted: 0, received: '' } as Counting;
  const server = createServer((socket: Socket) => {
    state.accepted++;
    socket.on('data', (chunk) => {
      state.received += chunk;
    });
    socket.on('error', () => {});
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, address, resolve);
  });
  const info = server.address() as { port: number; address: string };
  return Object.assign(state, { server, port: info.port, address: info.address });
}

const closing: Server[] = [];
/** The HTTP server's connections, for the bytes it read and wrote on each. */
const served: Socket[] = [];
/** Past the first 1 MiB a tunnel is moved by the host's splice relay (throughput-24). */
const bigBytes = 4 * 1024 * 1024;

/** The local addresses of the TCP sockets listening on `port` (/proc/net/tcp and tcp6). */
function listenersOn(port: number): string[] {
  const hexPort = port.toString(16).toUpperCase().padStart(4, '0');
  const listening = '0A';
  const found: string[] = [];
  for (const file of ['/proc/net/tcp', '/proc/net/tcp6']) {
    for (const line of readFileSync(file, 'utf8').split('\n').slice(1)) {
      const [, local, , state] = line.trim().split(/\s+/);
      if (local === undefined || state !== listening || !local.endsWith(`:${hexPort}`)) continue;
      const hex = local.split(':')[0]!;
      found.push(
        hex.length === 8
          ? (hex.match(/../g) ?? [])
              .reverse()
              .map((byte) => Number.parseInt(byte, 16))
              .join('.')
          : hex,
      );
    }
  }
  return found;
}

beforeAll(async () => {
  files = mkdtempSync(join(tmpdir(), 'coda-landlock-egress-'));
  chmodSync(files, 0o755);
  const certificate = makeCertificate(['secure.test', 'other.test']);
  caFile = join(files, 'ca.pem');
  writeFileSync(caFile, certificate.cert);
  chmodSync(caFile, 0o644);
  process.env.PATH = pathWithBwrap('always', 'bwrap: setting up uid map: Permission denied');
  const big = Buffer.alloc(bigBytes, 'x');
  http = await startHttp((request, response) => response.end(request.url === '/big' ? big : body));
  http.server.on('connection', (socket) => served.push(socket));
  https = await startHttps((_request, response) => response.end(body), certificate);
  sandbox = createSandbox(
    { network: { allow: ['api.test', 'secure.test'], allowPrivate: true }, timeoutMs: 30_000 },
    {
      lookup: tableLookup({
        'api.test': http.address,
        'other.test': http.address,
        'secure.test': https.address,
      }),
    },
  );
});

afterAll(async () => {
  await sandbox?.close();
  await http?.close();
  await https?.close();
  for (const server of closing) server.close();
  removeFakeBwraps();
  rmSync(files, { recursive: true, force: true });
  process.env.PATH = hostPath;
});

const deniedOther = (port: number) => ({
  host: 'other.test',
  port,
  reason: 'not-allowed',
  detail: `other.test:${port} matches no allow entry`,
});

/** The network-related controls a Landlock run with an allowlist claims, each tested below. */
const networkControls = [
  SandboxControl.landlockTcpProxyOnly,
  SandboxControl.egressProxy,
  SandboxControl.seccompTcpClientOnly,
  SandboxControl.connectSupervised,
];
/** Controls of the other network modes, which such a run must not claim. */
const otherModes = [
  SandboxControl.landlockNoTcp,
  SandboxControl.seccompNoInet,
  SandboxControl.seccompNoUnixConnect,
  SandboxControl.networkNamespace,
];

describe('a network allowlist on the Landlock backend', () => {
  it('curl reaches an allowed host through the proxy; another host is refused and reported', async () => {
    const mark = http.closedConnections.length;
    const plain = await sandbox.run(curl, ['-sS', `http://api.test:${http.port}/`]);
    expect(plain.stderr).toBe('');
    expect(plain.stdout).toBe(body);
    expect(plain.confinement).toBe('landlock');
    const [server] = await http.connectionsClosed(mark, 1);
    if (server === undefined) throw new Error('the server saw no connection close');
    expect(plain.network).toEqual({
      allowed: [
        {
          host: 'api.test',
          port: http.port,
          // What the upstream connection carried, heads included, as the server counted it.
          bytes: server.read + server.written,
          bytesSent: server.read,
          bytesReceived: server.written,
          connections: 1,
        },
      ],
      denied: [],
    });
    expect(plain.controls.filter((control) => networkControls.includes(control as never))).toEqual(
      networkControls,
    );
    expect(plain.controls.filter((control) => otherModes.includes(control as never))).toEqual([]);
    const tls = await sandbox.run(curl, ['-sS', '--cacert', caFile, 'https://secure.test/'], {
      readOnlyPaths: [files],
    });
    expect(tls.stderr).toBe('');
    expect(tls.stdout).toBe(body);
    expect(tls.network?.allowed.map((entry) => `${entry.host}:${entry.port}`)).toEqual([
      'secure.test:443',
    ]);
    const refused = await sandbox.run(curl, ['-sS', '--cacert', caFile, 'https://other.test/'], {
      readOnlyPaths: [files],
    });
    expect(refused.success).toBe(false);
    expect(refused.stderr).toContain('CONNECT tunnel failed, response 403');
    expect(refused.network).toEqual({ allowed: [], denied: [deniedOther(443)] });
  });

  it('node: fetch goes through the proxy to an allowed host; another is reported', async () => {
    const script = (url: string) =>
      `fetch(${JSON.stringify(url)}).then(async (r) => console.log(r.status, await r.text()), (e) => { console.log('failed', String(e.cause)); process.exitCode = 3; })`;
    const ok = await sandbox.run(publicNode(), ['-e', script('https://secure.test/')], {
      env: { NODE_EXTRA_CA_CERTS: caFile },
      readOnlyPaths: [files],
    });
    expect(ok.stdout).toBe(`200 ${body}\n`);
    expect(ok.network?.allowed.map((entry) => `${entry.host}:${entry.port}`)).toEqual([
      'secure.test:443',
    ]);
    const refused = await sandbox.run(publicNode(), [
      '-e',
      script(`http://other.test:${http.port}/`),
    ]);
    // Node's env proxy sends even plain HTTP as a CONNECT tunnel: a 403 there cancels the request.
    expect(refused.stdout).toBe('failed Error: Request was cancelled.\n');
    expect(refused.network).toEqual({ allowed: [], denied: [deniedOther(http.port)] });
  });

  it('a program ignoring the proxy: TCP refused (EACCES) but to the proxy, no UDP, Unix socket, listen or Fast Open (EPERM)', async () => {
    const direct = await counting();
    const upstream = http.port;
    const udp = createSocket('udp4');
    let datagrams = 0;
    udp.on('message', () => datagrams++);
    await new Promise<void>((resolve) => udp.bind(0, '127.0.0.1', resolve));
    const udpPort = udp.address().port;
    const script = [
      'import os, socket',
      'def attempt(name, action):',
      '  try:',
      '    action(); print(name, "ok")',
      '  except OSError as e: print(name, e.errno)',
      'tcp = lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM)',
      `attempt("direct", lambda: tcp().connect(("127.0.0.1", ${direct.port})))`,
      `attempt("upstream", lambda: tcp().connect(("${http.address}", ${upstream})))`,
      `attempt("upstream6", lambda: socket.socket(socket.AF_INET6).connect(("::1", ${upstream})))`,
      `attempt("udp", lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"x", ("127.0.0.1", ${udpPort})))`,
      'attempt("dns", lambda: socket.getaddrinfo("api.test", 80))',
      'attempt("unix", lambda: socket.socket(socket.AF_UNIX).connect("/run/does-not-matter"))',
      'attempt("sctp", lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM, 132))',
      'attempt("listen", lambda: tcp().listen(5))',
      'attempt("bind", lambda: tcp().bind(("127.0.0.1", 0)))',
      `attempt("fastopen", lambda: tcp().sendto(b"tfo", 0x20000000, ("127.0.0.1", ${direct.port})))`,
      'port = int(os.environ["HTTP_PROXY"].rsplit(":", 1)[1])',
      'attempt("proxy", lambda: tcp().connect(("127.0.0.1", port)))',
    ].join('\n');
    try {
      const result = await sandbox.run(python, ['-c', script]);
      expect(result.stderr).toBe('');
      expect(result.stdout.trim().split('\n')).toEqual([
        'direct 13', // EACCES: Landlock, no rule for this port
        'upstream 13', // the allowed host's real port: only the proxy reaches it
        'upstream6 13',
        'udp 1', // EPERM: seccomp makes no datagram socket
        'dns -3', // EAI_AGAIN: no resolver reachable (names resolve on the host, in the proxy)
        'unix 1', // EPERM: no AF_UNIX socket()
        'sctp 1',
        'listen 1', // EPERM: an unbound socket's listen would bind a port past Landlock
        'bind 13', // EACCES: Landlock handles bind and grants no port
        'fastopen 1', // EPERM: a Fast Open send would connect past Landlock
        'proxy ok',
      ]);
      expect({ accepted: direct.accepted, received: direct.received, datagrams }).toEqual({
        accepted: 0,
        received: '',
        datagrams: 0,
      });
      expect(result.network).toEqual({ allowed: [], denied: [] });
    } finally {
      direct.server.close();
      udp.close();
    }
  });

  it("another address on the proxy's port is refused too: the supervisor checks the address", async () => {
    // Landlock's rules are per port: alone, they let this through (the removal check of the
    // supervisor). The command prints the proxy's port, waits until the test listens on that
    // port of another loopback address, then connects there directly, and to the proxy.
    const elsewhere = randomLoopback();
    const script = [
      'import os, socket, sys',
      'port = int(os.environ["HTTP_PROXY"].rsplit(":", 1)[1])',
      'print(port, flush=True)',
      'sys.stdin.readline()',
      'for target in [("ELSEWHERE", port), ("127.0.0.1", port)]:',
      '  try:',
      '    s = socket.create_connection(target, 5); s.sendall(b"outside the proxy"); s.close(); print(target[0], "connected")',
      '  except OSError as e: print(target[0], "refused", e.errno)',
    ]
      .join('\n')
      .replace('ELSEWHERE', elsewhere);
    const child = sandbox.spawn(python, ['-c', script]);
    let stdout = '';
    const portLine = new Promise<number>((resolve) => {
      child.stdout.on('data', (chunk) => {
        stdout += chunk;
        if (stdout.includes('\n')) resolve(Number(stdout.split('\n')[0]));
      });
    });
    child.stderr.resume();
    const port = await portLine;
    // The proxy's listener, as the kernel lists it: 127.0.0.1 only (never the wildcard).
    expect(listenersOn(port)).toEqual(['127.0.0.1']);
    const outside = await counting(elsewhere, port);
    closing.push(outside.server);
    child.stdin.end('go\n');
    const exit = await child.exited;
    expect(exit.exitCode).toBe(0);
    // EACCES for the other address; the proxy itself takes the connection (and refuses the
    // bytes, which are no HTTP request: a 400 the program does not read).
    expect(stdout).toBe(`${port}\n${elsewhere} refused 13\n127.0.0.1 connected\n`);
    expect({ accepted: outside.accepted, received: outside.received }).toEqual({
      accepted: 0,
      received: '',
    });
  });

  it("the supervisor (the command's parent) passes on exit codes and signals, and serves a command's children", async () => {
    const exited = await sandbox.run(python, ['-c', 'raise SystemExit(7)']);
    expect([exited.exitCode, exited.signal]).toEqual([7, null]);
    const killed = await sandbox.run(python, [
      '-c',
      'import os, signal; os.kill(os.getpid(), signal.SIGTERM)',
    ]);
    expect([killed.exitCode, killed.signal]).toEqual([null, 'SIGTERM']);
    const slept = await sandbox.run(python, ['-c', 'import time; time.sleep(60)'], {
      timeoutMs: 1_000,
    });
    expect(slept).toMatchObject({ success: false, code: 'TIMEOUT', timedOut: true });
    // Killed at 1 s; the bound is for a loaded 2-core machine, far below the 60 s sleep.
    expect(slept.durationMs).toBeLessThan(20_000);
    // A command that kills its supervisor ends the run: the host waits for the supervisor's pid
    // and then kills the run's process group.
    const orphaned = await sandbox.run(python, [
      '-c',
      'import os, time\nos.kill(os.getppid(), 9)\ntime.sleep(10)\nprint("still running")',
    ]);
    expect([orphaned.signal, orphaned.stdout]).toEqual(['SIGKILL', '']);
    expect(orphaned.durationMs).toBeLessThan(8_000);
    const nested = await sandbox.run('/bin/sh', [
      '-c',
      `${curl} -sS http://api.test:${http.port}/`,
    ]);
    expect(nested.stdout).toBe(body);
    expect(nested.network?.allowed.map((entry) => `${entry.host}:${entry.port}`)).toEqual([
      `api.test:${http.port}`,
    ]);
  });

  it("the supervisor is out of the command's reach: its memory and descriptors are refused", async () => {
    // Same uid and Landlock domain: only the supervisor's being non-dumpable keeps the command
    // from reading its memory or reopening its seccomp listener through /proc.
    const script = [
      'import os',
      'ppid = os.getppid()',
      'print(open(f"/proc/{ppid}/cmdline", "rb").read().split(b"\\0")[0].decode())',
      'for what, action in [("fd", lambda: os.listdir(f"/proc/{ppid}/fd")), ("mem", lambda: open(f"/proc/{ppid}/mem", "rb"))]:',
      '  try: action(); print(what, "opened")',
      '  except OSError as e: print(what, e.errno)',
    ].join('\n');
    const result = await sandbox.run(python, ['-c', script]);
    expect(result.stdout).toBe('/usr/bin/perl\nfd 13\nmem 13\n');
  });

  it('a 4 MiB download through a CONNECT tunnel arrives whole and is counted exactly', async () => {
    const before = served.length;
    const result = await sandbox.run(curl, [
      '-sS',
      '-p',
      '-o',
      '/dev/null',
      '-w',
      '%{size_download}',
      `http://api.test:${http.port}/big`,
    ]);
    expect(result.stderr).toBe('');
    expect(result.stdout).toBe(String(bigBytes));
    expect(served.length).toBe(before + 1);
    const socket = served.at(-1)!;
    expect(result.network?.allowed).toEqual([
      {
        host: 'api.test',
        port: http.port,
        bytes: socket.bytesRead + socket.bytesWritten,
        bytesSent: socket.bytesRead,
        bytesReceived: socket.bytesWritten,
        connections: 1,
      },
    ]);
  });

  it('a spawned command emits each allowed and refused connection as it happens', async () => {
    const child = sandbox.spawn('/bin/sh', [
      '-c',
      `${curl} -sS http://api.test:${http.port}/ >/dev/null; ${curl} -sS http://other.test:${http.port}/ >/dev/null`,
    ]);
    // Listened to at once: the listener (and its port) come a moment later, the events after.
    const events: NetworkEvent[] = [];
    child.network?.on('event', (event) => events.push(event));
    child.stdin.end();
    child.stdout.resume();
    child.stderr.resume();
    await child.exited;
    expect(events.map((event) => `${event.type} ${event.host}:${event.port}`)).toEqual([
      `allowed api.test:${http.port}`,
      `denied other.test:${http.port}`,
    ]);
    expect(child.network?.report().denied).toEqual([deniedOther(http.port)]);
  });

  it('the proxy variables name 127.0.0.1 and one port; NO_PROXY is unset (loopback is the host here)', async () => {
    const script =
      'import os\nprint(os.environ["HTTP_PROXY"], os.environ["ALL_PROXY"], os.environ.get("NO_PROXY"))';
    const result = await sandbox.run(python, ['-c', script]);
    const match = /^http:\/\/127\.0\.0\.1:(\d+) socks5h:\/\/127\.0\.0\.1:(\d+) None\n$/.exec(
      result.stdout,
    );
    expect(match?.[1]).toBe(match?.[2]);
  });

  it('below Landlock ABI 4 (no TCP rules) the plan refuses the run UNAVAILABLE, with the reason', () => {
    const request = launchRequest({ network: { allow: ['api.test'] } });
    const plan = (abi: number) => () =>
      landlockArguments(request, { kind: 'own' }, abi, [], [], hostPaths, true);
    expect(plan(3)).toThrow(
      'A network allowlist needs Landlock ABI 3 has no TCP rules (ABI 4, Linux 6.7): a command could connect anywhere, not only to the egress proxy; the command did not run',
    );
    const thrown = (() => {
      try {
        plan(1)();
      } catch (error) {
        return error as SandboxUnavailableError;
      }
      return undefined;
    })();
    expect(thrown?.details).toEqual({
      reason:
        'Landlock ABI 1 has no TCP rules (ABI 4, Linux 6.7): a command could connect anywhere, not only to the egress proxy',
      confinement: 'landlock',
      field: 'network',
    });
  });

  it('a strict policy refuses the run (strict needs bubblewrap), never unconfined', async () => {
    const strict = createSandbox({ network: { allow: ['api.test'] }, strict: true });
    const result = await strict.run('/bin/true');
    expect(result.success).toBe(false);
    expect(result.success === false && result.code).toBe('UNAVAILABLE');
    const why = 'bwrap cannot create namespaces here: bwrap: setting up uid map: Permission denied';
    expect(result.success === false && result.error).toBe(
      `Refusing to run under landlock (strict policy needs bubblewrap): bubblewrap: ${why}; bubblewrap as the caller: ${why}`,
    );
    await strict.close();
  });
});
