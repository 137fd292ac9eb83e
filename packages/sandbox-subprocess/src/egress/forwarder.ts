// Inside a run's network namespace only loopback exists. This tiny forwarder (perl, which every
// Debian-family system has as perl-base; it starts in ~2 ms where node takes ~40) listens on
// 127.0.0.1 and ::1 at the proxy port and gets each connection to the host's proxy over the
// Unix socket bound into the sandbox; then the command runs. The pid namespace ends the forwarder
// with the command.
//
// Two ways to get a connection to the host. Passed (the default): before the command starts, the
// forwarder opens the run's first connection to the proxy socket, the channel; when the host
// answers 'P' on it (its relay helper took the channel), each accepted TCP connection is sent
// over it as a descriptor (SCM_RIGHTS) and closed here: the host reads the proxy request from
// the client's own socket and its splice relay moves a tunnel's bulk between that socket and the
// server, one relay instead of two. Relayed (the host answers 'R': no helper; or passing failed):
// each connection gets a child here that moves both ways with splice(2) (splice-relay.ts) to a
// new connection to the proxy socket, passing half-closes on.
//
// Why the host may trust a passed descriptor to be held by no one else (a holder could clear
// O_NONBLOCK on the shared file and block the host's reads): the channel is the listener's
// first connection, opened before the command exists (the host takes no second one), and the
// process that accepts and passes is not dumpable (PR_SET_DUMPABLE 0) before the command
// starts, so the command (same uid, no capabilities) can neither ptrace it nor take its
// descriptors; every descriptor it passes it got from accept() and closes once sent.

import { localLegSub, relaySub, relaySyscalls } from './splice-relay.ts';

/** The port the proxy has inside every run (its own network namespace, so no clash). */
export const proxyPortInside = 3128;

const script = String.raw`
use strict; use warnings; use Socket;
my ($path, $port, $splice, $nr_sendmsg, $nr_prctl) = splice(@ARGV, 0, 5);
my @listeners;
for my $spec ([PF_INET, pack_sockaddr_in($port, inet_aton('127.0.0.1'))],
              [PF_INET6, eval { pack_sockaddr_in6($port, inet_pton(AF_INET6, '::1')) }]) {
  next unless defined $spec->[1];
  socket(my $l, $spec->[0], SOCK_STREAM, 0) or next;
  setsockopt($l, SOL_SOCKET, SO_REUSEADDR, 1);
  bind($l, $spec->[1]) or next;
  listen($l, 128) or next;
  push @listeners, $l;
}
die "coda-sandbox: the egress forwarder could not listen on port $port\n" unless @listeners;
my $channel;
if ($nr_sendmsg && $nr_prctl && socket(my $ch, PF_UNIX, SOCK_STREAM, 0)) {
  my $got = connect($ch, pack_sockaddr_un($path)) && sysread($ch, my $mode, 1);
  $channel = $ch if $got && $mode eq 'P';
}
pipe(my $waiting, my $started) or die "coda-sandbox: pipe: $!\n";
my $pid = fork();
die "coda-sandbox: fork: $!\n" unless defined $pid;
if ($pid == 0) {
  close $waiting;
  # PR_SET_DUMPABLE 0 before the command starts (the parent waits for $started to close).
  undef $channel if $channel && syscall($nr_prctl, 4, 0, 0, 0, 0) != 0;
  close $started;
  $SIG{CHLD} = 'IGNORE'; $SIG{PIPE} = 'IGNORE';
  open(STDIN, '<', '/dev/null'); open(STDOUT, '>', '/dev/null'); open(STDERR, '>', '/dev/null');
  my $rin = ''; vec($rin, fileno($_), 1) = 1 for @listeners;
  while (1) {
    my $n = select(my $ready = $rin, undef, undef, undef);
    next if $n <= 0;
    for my $l (@listeners) {
      next unless vec($ready, fileno($l), 1);
      accept(my $c, $l) or next;
      if ($channel) {
        if (pass($channel, $c)) { close $c; next }
        undef $channel;
      }
      my $child = fork();
      if (defined $child && $child == 0) { close $_ for @listeners; carry($c); exit 0; }
      close $c;
    }
  }
}
close $channel if $channel;
close $started;
sysread($waiting, my $done, 1);
close $waiting;
close $_ for @listeners;
exec { $ARGV[0] } @ARGV or do { print STDERR "coda-sandbox: cannot run $ARGV[0]: $!\n"; exit 127 };

# One byte with the accepted socket as SCM_RIGHTS (struct msghdr, struct cmsghdr of x86-64 and
# aarch64: 64-bit lengths; CMSG_LEN(4) is 20, CMSG_SPACE(4) 24).
sub pass {
  my ($ch, $c) = @_;
  my $byte = 'c';
  my $iov = pack('QQ', unpack('J', pack('p', $byte)), 1);
  my $cmsg = pack('QLLLx4', 20, SOL_SOCKET, 1, fileno($c));
  my $msg = pack('QLx4QQQQLx4', 0, 0, unpack('J', pack('p', $iov)), 1, unpack('J', pack('p', $cmsg)), 24, 0);
  return syscall($nr_sendmsg, fileno($ch), $msg, 0) == 1;
}

sub carry {
  my ($c) = @_;
  socket(my $u, PF_UNIX, SOCK_STREAM, 0) or return;
  connect($u, pack_sockaddr_un($path)) or return;
  local_leg($c);
  relay($c, $u, undef, '', undef, $splice);
}
${relaySub}
${localLegSub}
`;

/**
 * The command line that starts the forwarder to `socket` (the run's proxy socket, bound into the
 * sandbox at its host path, opened with `forwarded: true`: its first connection is the
 * forwarder's channel), then `command` as it would have run.
 */
export function withForwarder(perl: string, socket: string, command: readonly string[]): string[] {
  return [
    perl,
    '-e',
    script,
    socket,
    String(proxyPortInside),
    String(relaySyscalls.splice),
    String(relaySyscalls.sendmsg),
    String(relaySyscalls.prctl),
    ...command,
  ];
}

/**
 * The proxy variables a run sees, in both spellings. `NO_PROXY` names the run's own loopback:
 * that is the run's namespace, never the host's, so servers the command starts itself stay
 * reachable. `NODE_USE_ENV_PROXY=1` makes Node's `fetch`, `http` and `https` use them (Node 24;
 * without it Node ignores the variables). `port`: where the proxy is on 127.0.0.1 (the Landlock
 * backend's runs reach the host's proxy port directly).
 */
export function proxyEnvironment(port = proxyPortInside): Record<string, string> {
  const http = `http://127.0.0.1:${port}`;
  const socks = `socks5h://127.0.0.1:${port}`;
  const local = 'localhost,127.0.0.1,::1';
  return {
    HTTP_PROXY: http,
    HTTPS_PROXY: http,
    ALL_PROXY: socks,
    NO_PROXY: local,
    http_proxy: http,
    https_proxy: http,
    all_proxy: socks,
    no_proxy: local,
    NODE_USE_ENV_PROXY: '1',
  };
}
