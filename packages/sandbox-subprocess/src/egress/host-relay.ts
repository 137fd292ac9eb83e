// The host side of a checked tunnel, out of Node's event loop: a perl child per connection,
// spawned with the client socket as its stdin and the upstream socket as its stdout, moving the
// bytes with splice(2). It stays trusted host code: it counts every chunk on fd 3 before
// passing it on (the proxy adds the counts to the run's report and enforces maxEgressBytes on
// them), it moves at most the run's remaining byte budget on its own, and the proxy kills it
// when the run's cap is passed by another connection or the listener closes.
import { type ChildProcess, spawn } from 'node:child_process';
import type { Socket } from 'node:net';
import { createInterface } from 'node:readline';
import { relaySub, spliceSyscall } from './splice-relay.ts';

/** What the relay's process name is (`ps`, /proc/PID/cmdline), so it can be told apart. */
export const relayProcessName = 'coda-egress-relay';

// fd 0: the client, fd 1: the upstream server, fd 2: why it failed, fd 3: the counts.
const script = String.raw`
use strict; use warnings;
${relaySub}
$0 = '${relayProcessName}';
open(my $x, '+<&=', 0) or die "fd 0: $!\n";
open(my $y, '+<&=', 1) or die "fd 1: $!\n";
open(my $counts, '>&=', 3) or die "fd 3: $!\n";
exit relay($x, $y, $counts, $ARGV[0], $ARGV[1]);
`;

/** Exit codes of a relay that ended as it should: the connection ended, or its budget ran out. */
const expectedExits: ReadonlySet<number> = new Set([0, 3]);

/** How a relay reports. */
export interface HostRelayHandlers {
  /** Bytes read from the client (`sent`) or the server (`received`); false cuts the relay. */
  count(sent: number, received: number): boolean;
  /** The relay ended other than by the connection ending, its budget or {@link HostRelay.destroy}. */
  failed(detail: string): void;
}

/** A started relay: the connection is its own from here on. */
export interface HostRelay {
  /** Kills the relay, which ends the connection. */
  destroy(): void;
  /** Once the relay is gone and every count it wrote has been read. */
  once(event: 'close', listener: () => void): unknown;
}

/**
 * Hands `client` and `upstream` to a relay process, or returns undefined when none could be
 * started (the caller keeps moving the bytes itself). Both sockets must hold nothing in Node:
 * nothing buffered to read, nothing queued to write. Node's own descriptors are closed here, so
 * the connection ends when the relay does. `budget`: bytes the relay may move on its own
 * (undefined: no cap).
 */
export function startHostRelay(
  perl: string,
  client: Socket,
  upstream: Socket,
  budget: number | undefined,
  handlers: HostRelayHandlers,
): HostRelay | undefined {
  let child: ChildProcess;
  try {
    child = spawn(perl, ['-e', script, '--', String(budget ?? -1), String(spliceSyscall)], {
      stdio: [client, upstream, 'pipe', 'pipe'],
    });
  } catch {
    return undefined;
  }
  child.on('error', () => {});
  if (child.pid === undefined) return undefined;
  // The relay holds its own copies now; Node's would keep the connection open after it ends.
  client.destroy();
  upstream.destroy();
  let killed = false;
  let stderr = '';
  child.stderr?.setEncoding('utf8');
  child.stderr?.on('data', (text: string) => {
    if (stderr.length < 2000) stderr += text;
  });
  const counts = child.stdio[3];
  if (counts !== null && counts !== undefined && 'on' in counts) {
    const lines = createInterface({ input: counts as NodeJS.ReadableStream });
    lines.on('line', (line) => {
      const [direction, size] = line.split(' ');
      const bytes = Number(size);
      if (!Number.isSafeInteger(bytes) || bytes < 0) return;
      const within =
        direction === 's' ? handlers.count(bytes, 0) : handlers.count(0, direction === 'r' ? bytes : 0);
      if (!within) relay.destroy();
    });
  }
  // 'close' comes after the exit and after every stdio stream (the counts) has ended.
  child.once('close', (code, signal) => {
    if (killed || (code !== null && expectedExits.has(code))) return;
    const how = signal === null ? `exit code ${code}` : `signal ${signal}`;
    handlers.failed(`the egress relay (pid ${child.pid}) ended with ${how}${stderr === '' ? '' : `: ${stderr.trim()}`}`);
  });
  const relay: HostRelay = {
    destroy: () => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      killed = true;
      child.kill('SIGKILL');
    },
    once: (_event, listener) => child.once('close', listener),
  };
  return relay;
}
