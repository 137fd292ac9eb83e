// Inside a run's network namespace only loopback exists. This tiny forwarder (perl, which every
// Debian-family system has as perl-base; it starts in ~2 ms where node takes ~40) listens on
// 127.0.0.1 and ::1 at the proxy port and carries each connection to the host's proxy over the
// Unix socket bound into the sandbox; then the command runs. The pid namespace ends the forwarder
// with the command.

import { relaySub, relaySyscalls } from './splice-relay.ts';

/** The port the proxy has inside every run (its own network namespace, so no clash). */
export const proxyPortInside = 3128;

// Forks the accept loop, then execs the command (which keeps the pid bwrap waits for). Each
// connection gets its own child that moves both ways with splice(2) (splice-relay.ts), passing
// half-closes on.
const script = String.raw`
use strict; use warnings; use Socket;
my ($path, $port, $splice) = (shift @ARGV, shift @ARGV, shift @ARGV);
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
my $pid = fork();
die "coda-sandbox: fork: $!\n" unless defined $pid;
if ($pid == 0) {
  $SIG{CHLD} = 'IGNORE';
  open(STDIN, '<', '/dev/null'); open(STDOUT, '>', '/dev/null'); open(STDERR, '>', '/dev/null');
  my $rin = ''; vec($rin, fileno($_), 1) = 1 for @listeners;
  while (1) {
    my $n = select(my $ready = $rin, undef, undef, undef);
    next if $n <= 0;
    for my $l (@listeners) {
      next unless vec($ready, fileno($l), 1);
      accept(my $c, $l) or next;
      my $child = fork();
      if (defined $child && $child == 0) { close $_ for @listeners; carry($c); exit 0; }
      close $c;
    }
  }
}
close $_ for @listeners;
exec { $ARGV[0] } @ARGV or do { print STDERR "coda-sandbox: cannot run $ARGV[0]: $!\n"; exit 127 };

sub carry {
  my ($c) = @_;
  socket(my $u, PF_UNIX, SOCK_STREAM, 0) or return;
  connect($u, pack_sockaddr_un($path)) or return;
  relay($c, $u, undef, '', undef, $splice);
}
${relaySub}
`;

/**
 * The command line that starts the forwarder to `socket` (the run's proxy socket, bound into the
 * sandbox at its host path), then `command` as it would have run.
 */
export function withForwarder(perl: string, socket: string, command: readonly string[]): string[] {
  return [
    perl,
    '-e',
    script,
    socket,
    String(proxyPortInside),
    String(relaySyscalls.splice),
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
