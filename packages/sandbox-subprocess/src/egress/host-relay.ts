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
//
// It also takes a run's forwarder channel (forwarder.ts): the Unix connection over which the
// forwarder inside the sandbox passes each accepted client socket. Node cannot receive a
// descriptor on an arbitrary Unix socket (only on its IPC channel), so the helper receives it,
// checks it is one connected TCP socket (anything else is refused and closed, the refusal
// reported), and sends it on to Node over the IPC channel as a net.Socket.
import { type ChildProcess, type SendHandle, spawn } from 'node:child_process';
import type { Socket } from 'node:net';
import { createInterface } from 'node:readline';
import { localLegSub, relaySub, relaySyscalls } from './splice-relay.ts';

/** The helper's process name (`ps`, /proc/PID/cmdline); its per-tunnel children add `: tunnel`. */
export const relayProcessName = 'coda-egress-relay';

// fd 0: commands from the proxy (`kill ID`, `grant ID N [final]`, passed to the tunnel's relay
// on a pipe of its own; `drop ID`, closing forwarder channel ID), fd 1: `ID s|r N` counts and
// `ID end STATUS` (`ID end STATUS cut` when the proxy had it killed; one that had ended already
// is not), and `pass ID refused WHY` for a refused descriptor on forwarder channel ID,
// fd 2: why it failed, NODE_CHANNEL_FD: Node's IPC channel, the sockets arriving as
// {"cmd":"NODE_HANDLE",...,"msg":{"relay":ID,"side":"client"|"upstream","budget":N,"final":B}} with one
// descriptor each (client first), or {..."msg":{"pass":ID}} with a forwarder channel,
// acknowledged as Node's protocol wants; each client socket that came over channel ID goes back
// as {"cmd":"NODE_HANDLE","type":"net.Socket","msg":{"adopted":ID}} with its descriptor. A kill
// for an ID whose sockets have not both arrived is remembered (IDs only grow), so a tunnel cut
// early never starts.
const script = String.raw`
use strict; use warnings; use POSIX ':sys_wait_h'; use Fcntl qw(F_GETFL F_SETFL O_NONBLOCK);
${relaySub}
my ($nr_splice, $nr_recvmsg, $nr_prctl, $nr_sendmsg) = @ARGV;
$0 = '${relayProcessName}';
$SIG{PIPE} = 'IGNORE';
$SIG{CHLD} = sub {};
my $helper = $$;
open(my $chan, '+<&=', $ENV{NODE_CHANNEL_FD}) or die "the IPC channel: $!\n";
my (%half, %pid, %id, %dead, %cut, %ctl, %pass, @fds);
my ($in, $highest) = ('', 0);
my $buf = "\0" x 65536; my $ctl = "\0" x 512;
my $iov = pack('QQ', unpack('J', pack('p', $buf)), length $buf);
while (1) {
  while ((my $p = waitpid(-1, WNOHANG)) > 0) { ended($p, $?) }
  my $rin = ''; vec($rin, 0, 1) = 1; vec($rin, fileno($chan), 1) = 1;
  vec($rin, fileno($_), 1) = 1 for values %pass;
  next if select(my $rout = $rin, undef, undef, undef) <= 0;
  for my $p (keys %pass) { passed($p) if $pass{$p} && vec($rout, fileno($pass{$p}), 1) }
  if (vec($rout, 0, 1)) {
    my $got = sysread(STDIN, my $commands, 65536);
    quit() unless $got;
    while ($commands =~ /^grant (\d+) (\d+ ?(?:final)?)$/mg) { put($ctl{$1}, "$2\n") if $ctl{$1} }
    for my $p ($commands =~ /^drop (\d+)$/mg) { close(delete $pass{$p}) if $pass{$p} }
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
    put($chan, qq({"cmd":"NODE_HANDLE_ACK"}\n));
    if ($line =~ /"pass":(\d+)/) {
      my $p = $1;
      next unless defined $fd && open(my $fh, '+<&=', $fd);
      fcntl($fh, F_SETFL, fcntl($fh, F_GETFL, 0) | O_NONBLOCK);
      # 'P': the forwarder passes its connections here from now on.
      if ($nr_sendmsg && (syswrite($fh, 'P') // 0) == 1) { $pass{$p} = $fh } else { close $fh }
      next;
    }
    my ($c) = $line =~ /"relay":(\d+)/;
    my ($side) = $line =~ /"side":"(client|upstream)"/;
    next unless defined $fd && defined $c && defined $side && open(my $fh, '+<&=', $fd);
    $highest = $c if $c > $highest;
    if ($dead{$c}) {
      close $fh;
      if ($side eq 'upstream') { delete $dead{$c}; put(\*STDOUT, "$c end 9 cut\n") }
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
  if (!defined $p) { put(\*STDOUT, "$c end -1\n"); close $_ for grep { defined && ref } $h->{client}, $h->{upstream}, $grants, $granter; return }
  if ($p == 0) {
    syscall($nr_prctl, 1, 9);
    exit 0 if getppid() != $helper;
    $SIG{CHLD} = 'DEFAULT';
    close $chan; close STDIN; close $_ for values %ctl, values %pass;
    for my $other (values %half) { close $_ for grep { ref eq 'GLOB' } values %$other }
    if ($h->{cap}) { close $granter; $h->{cap}{control} = $grants }
    $0 = '${relayProcessName}: tunnel';
    local_leg($h->{client});
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
  put(\*STDOUT, "$c end $status" . (delete $cut{$c} ? " cut\n" : "\n"));
}
sub quit { kill 'KILL', values %pid; exit 0 }
${localLegSub}
# One message on forwarder channel $p: exactly one byte with exactly one descriptor, which must be
# a connected TCP socket; it goes to Node, anything else is closed and reported.
sub passed {
  my ($p) = @_;
  my $data = "\0" x 16; my $control = "\0" x 256;
  my $iov = pack('QQ', unpack('J', pack('p', $data)), length $data);
  my $msg = pack('QLx4QQQQLx4', 0, 0, unpack('J', pack('p', $iov)), 1, unpack('J', pack('p', $control)), length $control, 0);
  # MSG_CMSG_CLOEXEC | MSG_DONTWAIT
  my $got = syscall($nr_recvmsg, fileno($pass{$p}), $msg, 0x40000040);
  return if $got < 0 && ($!{EAGAIN} || $!{EINTR});
  if ($got <= 0) { close(delete $pass{$p}); return }
  my ($clen, $flags) = (unpack('QLx4QQQQLx4', $msg))[5, 6];
  my @got;
  for (my $at = 0; $at + 16 <= $clen;) {
    my ($len, $level, $type) = unpack('QLL', substr($control, $at, 16));
    last if $len < 16 || $at + $len > $clen;
    push @got, unpack('L*', substr($control, $at + 16, $len - 16)) if $level == 1 && $type == 1;
    $at += ($len + 7) & ~7;
  }
  my @handles;
  for my $fd (@got) {
    if (open(my $h, '+<&=', $fd)) { push @handles, $h } else { POSIX::close($fd) }
  }
  my $why = ($flags & 8) || @got > 1 ? 'more than one descriptor in a message'
    : !@got ? 'a message without a descriptor'
    : @handles != 1 ? 'a descriptor that cannot be opened'
    : $got != 1 ? 'more than one byte with a descriptor'
    : not_tcp($handles[0]);
  if (defined $why) {
    close $_ for @handles;
    put(\*STDOUT, "pass $p refused $why\n");
    return;
  }
  my $json = qq({"cmd":"NODE_HANDLE","type":"net.Socket","msg":{"adopted":$p}}\n);
  my $out = pack('QQ', unpack('J', pack('p', $json)), length $json);
  my $cmsg = pack('QLLLx4', 20, 1, 1, fileno($handles[0]));
  my $send = pack('QLx4QQQQLx4', 0, 0, unpack('J', pack('p', $out)), 1, unpack('J', pack('p', $cmsg)), 24, 0);
  my $sent;
  do { $sent = syscall($nr_sendmsg, fileno($chan), $send, 0) } while ($sent < 0 && $!{EINTR});
  close $handles[0];
  # The descriptor went with the first byte; a signal may have cut the rest short.
  quit() if $sent <= 0 || !put($chan, substr($json, $sent));
}
# Writes all of $data to $fh, blocking: a signal (SIGCHLD, whose handler perl installs without
# SA_RESTART) interrupts a blocked write with EINTR, which is no failure. False when it fails.
# Found by attack round 36: a sendmsg on the full IPC channel failed EINTR when a relay child
# ended, and the helper quit, killing every run's relays.
sub put {
  my ($fh, $data) = @_;
  while (length $data) {
    my $n = syswrite($fh, $data);
    if (!defined $n) { next if $!{EINTR}; return 0 }
    substr($data, 0, $n) = '';
  }
  return 1;
}
# Why a passed descriptor is not a connected TCP socket, or undef when it is.
sub not_tcp {
  my ($h) = @_;
  return 'a descriptor that is not a socket' unless -S $h;
  my $int = sub { my $v = getsockopt($h, 1, $_[0]); defined $v ? unpack('i', $v) : -1 };
  return 'a socket that is not a stream' unless $int->(3) == 1;
  my $domain = $int->(39);
  return 'a socket that is not IPv4 or IPv6' unless $domain == 2 || $domain == 10;
  return 'a socket that is not TCP' unless $int->(38) == 6;
  return 'a listening socket' unless $int->(30) == 0;
  return 'a socket that is not connected' unless defined getpeername($h);
  return undef;
}
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

/** Where the client sockets passed over one forwarder channel go. */
export interface ForwarderChannelHandlers {
  /** A connected TCP socket the forwarder accepted, now Node's (read the proxy request from it). */
  adopted(socket: Socket): void;
  /** A descriptor the helper refused (not one connected TCP socket), and why. */
  refused(detail: string): void;
}

/** A forwarder channel the helper holds. */
export interface ForwarderChannel {
  /** Closes the channel in the helper (no more sockets come over it). */
  close(): void;
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
  readonly #channels = new Map<number, ForwarderChannelHandlers>();
  #nextChannel = 0;
  #closing = false;

  /** @param perl - the perl that runs the helper. */
  constructor(perl: string) {
    this.#perl = perl;
  }

  /** Starts the helper now, if it is not running (spawn blocks the event loop for a fork). */
  start(): ChildProcess | undefined {
    if (
      this.#closing ||
      relaySyscalls.recvmsg === 0 ||
      relaySyscalls.prctl === 0 ||
      relaySyscalls.sendmsg === 0
    )
      return undefined;
    if (this.#child !== undefined) return this.#child;
    const { splice, recvmsg, prctl, sendmsg } = relaySyscalls;
    let child: ChildProcess;
    try {
      child = spawn(
        this.#perl,
        ['-e', script, '--', String(splice), String(recvmsg), String(prctl), String(sendmsg)],
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
    child.on('message', (message: unknown, handle: unknown) => this.#adopt(message, handle));
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

  /**
   * Gives a run's forwarder channel (forwarder.ts) to the helper, which answers 'P' on it and
   * from then on receives the client sockets the forwarder passes, checks each, and sends it to
   * `handlers`. Node must not have read from `channel` (a read would drop the descriptors
   * riding with the bytes); Node's descriptor is closed once sent. Undefined when the helper
   * cannot take it (the caller answers 'R': the forwarder then relays each connection).
   */
  takeChannel(channel: Socket, handlers: ForwarderChannelHandlers): ForwarderChannel | undefined {
    const child = this.start();
    const handle = handleOf(channel);
    if (child === undefined || !child.connected || handle === undefined) return undefined;
    const id = ++this.#nextChannel;
    this.#channels.set(id, handlers);
    handle.readStop();
    handle.reading = false;
    child.send({ pass: id }, handle as unknown as SendHandle, { keepOpen: true }, (error) => {
      channel.destroy();
      if (error !== null && error !== undefined) {
        this.#channels.delete(id);
        handlers.refused(`the egress relay could not take the forwarder channel: ${error.message}`);
      }
    });
    return {
      close: () => {
        if (!this.#channels.delete(id)) return;
        this.#child?.stdin?.write(`drop ${id}\n`);
      },
    };
  }

  /** A client socket from a forwarder channel, sent by the helper as `{ adopted: ID }`. */
  #adopt(message: unknown, handle: unknown): void {
    const id = (message as { adopted?: unknown } | null)?.adopted;
    if (typeof id !== 'number') return;
    const socket = handle as Socket | undefined;
    const handlers = this.#channels.get(id);
    if (socket === undefined || typeof socket.destroy !== 'function') return;
    if (handlers === undefined) socket.destroy();
    else handlers.adopted(socket);
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

  /** One line from the helper: counts, a tunnel's end, or a refused passed descriptor. */
  #report(line: string): void {
    const refused = /^pass (\d+) refused (.*)$/.exec(line);
    if (refused !== null) {
      this.#channels.get(Number(refused[1]))?.refused(refused[2] ?? '');
      return;
    }
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
