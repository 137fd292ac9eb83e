// The host side of checked tunnels, out of Node's event loop: one long-lived perl helper per
// proxy receives both sockets of each tunnel that passed its checks (over Node's IPC channel,
// as SCM_RIGHTS descriptors) and forks a child per tunnel that moves the bytes with splice(2).
// One helper rather than a process per tunnel because spawn() from Node blocks the event loop
// for the whole fork (20–30 ms measured here), where the helper's fork costs Node nothing.
// It stays trusted host code: each child writes its counts to the proxy before passing a chunk
// on (the proxy adds them to the run's report and enforces maxEgressBytes on them), holds at
// most 1 MiB of the run's byte cap at a time (the proxy grants more as it counts), dies with
// the helper (PR_SET_PDEATHSIG), and the proxy kills it when the run's cap is passed elsewhere
// or the listener closes.
import { type ChildProcess, type SendHandle, spawn } from 'node:child_process';
import type { Socket } from 'node:net';
import { createInterface } from 'node:readline';
import { relaySub, relaySyscalls } from './splice-relay.ts';

/** The helper's process name (`ps`, /proc/PID/cmdline); its per-tunnel children add `: tunnel`. */
export const relayProcessName = 'coda-egress-relay';

// fd 0: commands from the proxy (`kill ID`, `grant ID N [final]`, passed to the tunnel's relay
// on a pipe of its own), fd 1: `ID s|r N` counts and `ID end STATUS`
// (`ID end STATUS cut` when the proxy had it killed; one that had ended already is not),
// fd 2: why it failed, NODE_CHANNEL_FD: Node's IPC channel, the sockets arriving as
// {"cmd":"NODE_HANDLE",...,"msg":{"relay":ID,"side":"client"|"upstream","budget":N,"final":B}} with one
// descriptor each (client first), acknowledged as Node's protocol wants. A kill for an ID whose
// sockets have not both arrived is remembered (IDs only grow), so a tunnel cut early never starts.
const script = String.raw`
use strict; use warnings; use POSIX ':sys_wait_h';
${relaySub}
my ($nr_splice, $nr_recvmsg, $nr_prctl) = @ARGV;
$0 = '${relayProcessName}';
$SIG{PIPE} = 'IGNORE';
$SIG{CHLD} = sub {};
my $helper = $$;
open(my $chan, '+<&=', $ENV{NODE_CHANNEL_FD}) or die "the IPC channel: $!\n";
my (%half, %pid, %id, %dead, %cut, %ctl, @fds);
my ($in, $highest) = ('', 0);
my $buf = "\0" x 65536; my $ctl = "\0" x 512;
my $iov = pack('QQ', unpack('J', pack('p', $buf)), length $buf);
while (1) {
  while ((my $p = waitpid(-1, WNOHANG)) > 0) { ended($p, $?) }
  my $rin = ''; vec($rin, 0, 1) = 1; vec($rin, fileno($chan), 1) = 1;
  next if select(my $rout = $rin, undef, undef, undef) <= 0;
  if (vec($rout, 0, 1)) {
    my $got = sysread(STDIN, my $commands, 65536);
    quit() unless $got;
    while ($commands =~ /^grant (\d+) (\d+ ?(?:final)?)$/mg) { syswrite($ctl{$1}, "$2\n") if $ctl{$1} }
    for my $c ($commands =~ /^kill (\d+)$/mg) {
      if ($pid{$c} && waitpid($pid{$c}, WNOHANG) == $pid{$c}) { ended($pid{$c}, $?) }
      elsif ($pid{$c}) { kill 'KILL', $pid{$c}; $cut{$c} = 1 }
      elsif ($c > $highest || $half{$c}) { $dead{$c} = 1; close $_ for grep { ref eq 'GLOB' } values %{delete $half{$c} // {}} }
    }
  }
  next unless vec($rout, fileno($chan), 1);
  my $msg = pack('QLx4QQQQLx4', 0, 0, unpack('J', pack('p', $iov)), 1, unpack('J', pack('p', $ctl)), length $ctl, 0);
  my $got = syscall($nr_recvmsg, fileno($chan), $msg, 0);
  next if $got < 0 && ($!{EINTR} || $!{EAGAIN});
  quit() if $got <= 0;
  my $clen = (unpack('QLx4QQQQ', $msg))[5];
  if ($clen >= 16) {
    my ($len, $level, $type) = unpack('QLL', $ctl);
    push @fds, unpack('L*', substr($ctl, 16, $len - 16)) if $level == 1 && $type == 1;
  }
  $in .= substr($buf, 0, $got);
  while ($in =~ s/^([^\n]*)\n//) {
    my $line = $1;
    next unless $line =~ /"cmd":"NODE_HANDLE"/;
    my $fd = shift @fds;
    syswrite($chan, qq({"cmd":"NODE_HANDLE_ACK"}\n));
    my ($c) = $line =~ /"relay":(\d+)/;
    my ($side) = $line =~ /"side":"(client|upstream)"/;
    next unless defined $fd && defined $c && defined $side && open(my $fh, '+<&=', $fd);
    $highest = $c if $c > $highest;
    if ($dead{$c}) {
      close $fh;
      if ($side eq 'upstream') { delete $dead{$c}; syswrite(STDOUT, "$c end 9 cut\n") }
      next;
    }
    $half{$c}{$side} = $fh;
    if ($side eq 'upstream' && $line =~ /"budget":(\d+)/) {
      # Taken before the next match: a successful one (the "final" test) resets $1.
      my $budget = $1;
      $half{$c}{cap} = { budget => $budget, final => $line =~ /"final":true/ ? 1 : 0 };
    }
    start($c) if $half{$c}{client} && $half{$c}{upstream};
  }
}
sub start {
  my ($c) = @_;
  my $h = delete $half{$c};
  my ($grants, $granter);
  pipe($grants, $granter) if $h->{cap};
  my $p = fork();
  if (!defined $p) { syswrite(STDOUT, "$c end -1\n"); close $_ for grep { defined && ref } $h->{client}, $h->{upstream}, $grants, $granter; return }
  if ($p == 0) {
    syscall($nr_prctl, 1, 9);
    exit 0 if getppid() != $helper;
    $SIG{CHLD} = 'DEFAULT';
    close $chan; close STDIN; close $_ for values %ctl;
    for my $other (values %half) { close $_ for grep { ref eq 'GLOB' } values %$other }
    if ($h->{cap}) { close $granter; $h->{cap}{control} = $grants }
    $0 = '${relayProcessName}: tunnel';
    exit relay($h->{client}, $h->{upstream}, \*STDOUT, $c, $h->{cap}, $nr_splice);
  }
  $pid{$c} = $p; $id{$p} = $c;
  if ($h->{cap}) { close $grants; $ctl{$c} = $granter }
  close $h->{client}; close $h->{upstream};
}
sub ended {
  my ($p, $status) = @_;
  my $c = delete $id{$p};
  return unless defined $c;
  delete $pid{$c};
  close(delete $ctl{$c}) if $ctl{$c};
  syswrite(STDOUT, "$c end $status" . (delete $cut{$c} ? " cut\n" : "\n"));
}
sub quit { kill 'KILL', values %pid; exit 0 }
`;

/** How a tunnel's relay reports to the proxy. */
export interface HostRelayHandlers {
  /** Bytes read from the client (`sent`) or the server (`received`); false cuts the tunnel. */
  count(sent: number, received: number): boolean;
  /** The relay ended other than by the tunnel ending, its budget, or {@link HostRelay.destroy}. */
  failed(detail: string): void;
  /** The relay stopped at its final budget: a byte past it came (and was counted). */
  overBudget(): void;
}

/** A tunnel the relay carries from here on. */
export interface HostRelay {
  /** Kills the tunnel's relay, which ends the connection. */
  destroy(): void;
  /** Lets the relay pass `bytes` more on; `final`: no more will come. */
  grant(bytes: number, final: boolean): void;
  /** Once the tunnel's relay is gone and every count it wrote has been read. */
  once(event: 'close', listener: () => void): unknown;
}

/** The proxy's side of one tunnel in the helper. */
interface Tunnel {
  readonly handlers: HostRelayHandlers;
  readonly closeListeners: (() => void)[];
  killed: boolean;
}

/** The exit code of a tunnel relay that stopped at its final budget (splice-relay.ts). */
const overBudgetExit = 3;
/** Exit codes of a tunnel relay that ended as it should: the tunnel ended, or its budget ran out. */
const expectedExits: ReadonlySet<number> = new Set([0, overBudgetExit]);

/** A libuv stream handle as Node keeps it on a socket (`socket._handle`). */
interface StreamHandle {
  reading?: boolean;
  readStop(): number;
}

/** The libuv handle under `socket`, when Node still has one that can stop reading. */
function handleOf(socket: Socket): StreamHandle | undefined {
  const handle = (socket as unknown as { _handle?: unknown })._handle;
  return typeof handle === 'object' &&
    handle !== null &&
    typeof (handle as Partial<StreamHandle>).readStop === 'function'
    ? (handle as StreamHandle)
    : undefined;
}

/** What a wait status from perl's `$?` says, in words. */
function describeStatus(status: number): string {
  if (status < 0) return 'could not be started (fork failed)';
  const signal = status & 0x7f;
  return signal === 0 ? `ended with exit code ${status >> 8}` : `ended by signal ${signal}`;
}

/**
 * The host-side relay helper of one proxy, started on first use: hands tunnels that passed
 * their checks to it, or says it cannot (the caller keeps moving the bytes in Node).
 */
export class HostRelays {
  readonly #perl: string;
  #child: ChildProcess | undefined;
  #next = 0;
  readonly #tunnels = new Map<number, Tunnel>();
  #closing = false;

  /** @param perl - the perl that runs the helper. */
  constructor(perl: string) {
    this.#perl = perl;
  }

  /** Starts the helper now, if it is not running (spawn blocks the event loop for a fork). */
  start(): ChildProcess | undefined {
    if (this.#closing || relaySyscalls.recvmsg === 0 || relaySyscalls.prctl === 0) return undefined;
    if (this.#child !== undefined) return this.#child;
    const { splice, recvmsg, prctl } = relaySyscalls;
    let child: ChildProcess;
    try {
      child = spawn(
        this.#perl,
        ['-e', script, '--', String(splice), String(recvmsg), String(prctl)],
        {
          stdio: ['pipe', 'pipe', 'pipe', 'ipc'],
          serialization: 'json',
          // Nothing from the host's environment (PERL5OPT, PERL5LIB) reaches the helper; Node
          // adds NODE_CHANNEL_FD itself.
          env: {},
        },
      );
    } catch {
      return undefined;
    }
    if (child.pid === undefined) return undefined;
    this.#child = child;
    child.on('error', () => {});
    child.stdin?.on('error', () => {});
    let stderr = '';
    child.stderr?.setEncoding('utf8');
    child.stderr?.on('data', (text: string) => {
      if (stderr.length < 2000) stderr += text;
    });
    if (child.stdout !== null) {
      createInterface({ input: child.stdout }).on('line', (line) => this.#report(line));
    }
    child.once('close', (code, signal) => {
      if (this.#child === child) this.#child = undefined;
      const how = signal === null ? `ended with exit code ${code}` : `ended by ${signal}`;
      const detail = `the egress relay (pid ${child.pid}) ${how}${stderr === '' ? '' : `: ${stderr.trim()}`}`;
      for (const id of [...this.#tunnels.keys()]) this.#end(id, this.#closing ? undefined : detail);
    });
    this.#refresh();
    return child;
  }

  /**
   * Hands `client` and `upstream` to the helper, or returns undefined when it cannot take them.
   * Both sockets must hold nothing in Node (nothing buffered to read, nothing queued to write);
   * Node stops reading them here and closes its descriptors once they are sent. `cap`: the bytes
   * the tunnel may pass on before it is granted more (undefined: no cap), `final` when no more
   * will come.
   */
  handOff(
    client: Socket,
    upstream: Socket,
    cap: { readonly bytes: number; readonly final: boolean } | undefined,
    handlers: HostRelayHandlers,
  ): HostRelay | undefined {
    const child = this.start();
    const clientHandle = handleOf(client);
    const upstreamHandle = handleOf(upstream);
    if (child === undefined || !child.connected || !clientHandle || !upstreamHandle)
      return undefined;
    const id = ++this.#next;
    const tunnel: Tunnel = { handlers, closeListeners: [], killed: false };
    this.#tunnels.set(id, tunnel);
    this.#refresh();
    // Node's descriptors go once both are in the helper's hands (each closed socket would cut
    // its peer), and must go: they would keep the tunnel open after the relay ends.
    let unsent = 2;
    let failure: Error | undefined;
    const give = (handle: StreamHandle, message: object): void => {
      handle.readStop();
      handle.reading = false;
      child.send(message, handle as unknown as SendHandle, { keepOpen: true }, (error) => {
        failure ??= error ?? undefined;
        if (--unsent > 0) return;
        client.destroy();
        upstream.destroy();
        if (failure !== undefined) {
          // Cut meanwhile (the cap, close()): not the relay's failure.
          const cut = tunnel.killed;
          this.#kill(id);
          this.#end(
            id,
            cut ? undefined : `the egress relay could not take the tunnel: ${failure.message}`,
          );
        }
      });
    };
    give(clientHandle, { relay: id, side: 'client' });
    give(upstreamHandle, {
      relay: id,
      side: 'upstream',
      budget: cap?.bytes ?? -1,
      final: cap?.final ?? false,
    });
    return {
      destroy: () => this.#kill(id),
      grant: (bytes, final) => {
        if (this.#tunnels.get(id) === tunnel && !tunnel.killed) {
          this.#child?.stdin?.write(`grant ${id} ${bytes}${final ? ' final' : ''}\n`);
        }
      },
      once: (_event, listener) => {
        if (this.#tunnels.get(id) === tunnel) tunnel.closeListeners.push(listener);
        else listener();
      },
    };
  }

  /** Kills the helper and every tunnel it carries; resolves once all of them are gone. */
  async close(): Promise<void> {
    this.#closing = true;
    const child = this.#child;
    if (child === undefined) return;
    await new Promise<void>((resolve) => {
      child.once('close', () => resolve());
      child.kill('SIGKILL');
    });
  }

  #kill(id: number): void {
    const tunnel = this.#tunnels.get(id);
    if (tunnel === undefined || tunnel.killed) return;
    tunnel.killed = true;
    this.#child?.stdin?.write(`kill ${id}\n`);
  }

  /** One line from the helper: counts, or a tunnel's end. */
  #report(line: string): void {
    const [idText, what, value, cut] = line.split(' ');
    const tunnel = this.#tunnels.get(Number(idText));
    const number = Number(value);
    if (tunnel === undefined || !Number.isSafeInteger(number)) return;
    if (what === 's' || what === 'r') {
      const within =
        what === 's' ? tunnel.handlers.count(number, 0) : tunnel.handlers.count(0, number);
      if (!within) this.#kill(Number(idText));
    } else if (what === 'end') {
      const exitCode = number >= 0 && (number & 0x7f) === 0 ? number >> 8 : undefined;
      if (cut !== 'cut' && exitCode === overBudgetExit) tunnel.handlers.overBudget();
      const expected = cut === 'cut' || (exitCode !== undefined && expectedExits.has(exitCode));
      this.#end(
        Number(idText),
        expected ? undefined : `the egress relay of this tunnel ${describeStatus(number)}`,
      );
    }
  }

  #end(id: number, failure: string | undefined): void {
    const tunnel = this.#tunnels.get(id);
    if (tunnel === undefined) return;
    this.#tunnels.delete(id);
    this.#refresh();
    if (failure !== undefined) tunnel.handlers.failed(failure);
    for (const listener of tunnel.closeListeners) listener();
  }

  /** The helper keeps Node running only while it carries tunnels. */
  #refresh(): void {
    const child = this.#child;
    if (child === undefined) return;
    const busy = this.#tunnels.size > 0;
    for (const stream of [child.stdout, child.stderr, child.stdin] as (Socket | null)[]) {
      if (busy) stream?.ref();
      else stream?.unref();
    }
    if (busy) child.ref();
    else child.unref();
    const channel = child.channel as { ref?(): void; unref?(): void } | undefined;
    if (busy) channel?.ref?.();
    else channel?.unref?.();
  }
}
