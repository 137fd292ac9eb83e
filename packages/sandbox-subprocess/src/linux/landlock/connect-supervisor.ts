// The Landlock backend's answer to its rules being per port: with a network allowlist every
// `connect(2)` of the command stops at the seccomp filter (SECCOMP_RET_USER_NOTIF) and this
// supervisor, the command's parent, decides it. It reads the address the call names, refuses
// (EACCES) anything but the proxy's 127.0.0.1:PORT (or its IPv4-mapped IPv6 form), and for the
// proxy connects the command's socket itself, to its own copy of the address, through
// pidfd_getfd: what the kernel connects to is never read from the command's memory, so a
// thread rewriting the address after the check changes nothing. Landlock's port rule stays
// under it, a second line. Perl subroutines appended to the applier (applier-script.ts).

/**
 * `supervise($port)`, called by the applier after landlock_restrict_self and close_range, in
 * place of installing the filter: forks; the child installs the filter with a listener
 * (SECCOMP_FILTER_FLAG_NEW_LISTENER), hands the listener to the parent, closes its own copy and
 * returns (to write the start byte and exec the command); the parent takes the listener, lets go
 * of every descriptor of the run, answers notifications until the child exits and then exits as
 * it did (same code, or the same signal). Uses the applier's `fail` and its syscall numbers
 * ($prctl, $seccompNr, $ioctlNr, $connectNr, $pidfdOpen, $pidfdGetfd, $closeNr).
 */
export const connectSupervisor = String.raw`
sub fdclose { syscall($closeNr, $_[0] + 0) }
sub supervise {
  my ($port, $prog, $started) = @_;
  pipe(my $fromChild, my $toParent) or fail('pipe');
  pipe(my $fromParent, my $toChild) or fail('pipe');
  my $child = fork();
  defined $child or fail('fork');
  if ($child == 0) {
    close $fromChild; close $toChild;
    my $fprog = pack('S x6 Q', length($prog) / 8, unpack('Q', pack('p', $prog)));
    my $listener = syscall($seccompNr, 1, 8, $fprog);
    $listener >= 0 or fail('seccomp(SECCOMP_FILTER_FLAG_NEW_LISTENER)');
    syswrite($toParent, pack('L', $listener)) == 4 or fail('listener handoff');
    sysread($fromParent, my $ack, 1) == 1 or fail('listener handoff');
    fdclose($listener);
    close $toParent; close $fromParent;
    return;
  }
  close $toParent; close $fromParent;
  # Not dumpable: the command (same uid, same domain) may then not read this process's memory,
  # nor its descriptors through /proc, nor take one with pidfd_getfd (the listener among them).
  syscall($prctl, 4, 0, 0, 0, 0) == 0 or do { kill 'KILL', $child; fail('prctl(PR_SET_DUMPABLE)') };
  my $stop = sub { kill 'KILL', $child; waitpid($child, 0); fail($_[0]) };
  sysread($fromChild, my $number, 4) == 4 or do { waitpid($child, 0); exit 126 };
  my $pidfd = syscall($pidfdOpen, $child, 0);
  $pidfd >= 0 or $stop->('pidfd_open');
  my $listener = syscall($pidfdGetfd, $pidfd, unpack('L', $number), 0);
  $listener >= 0 or $stop->('pidfd_getfd(listener)');
  fdclose($pidfd);
  syswrite($toChild, 'k') == 1 or $stop->('listener handoff');
  close $toChild; close $fromChild;
  fdclose($started) if $started >= 0;
  open(STDIN, '<', '/dev/null'); open(STDOUT, '>', '/dev/null'); open(STDERR, '>', '/dev/null');
  serve($listener, $child, $port);
}
sub serve {
  my ($listener, $child, $port) = @_;
  local $SIG{CHLD} = sub {};
  my $rin = ''; vec($rin, $listener, 1) = 1;
  while (1) {
    if (waitpid($child, 1) == $child) {
      my $status = $?;
      # Killed by a signal: the same signal here (its default action), else 128 + it, as a shell says.
      if ($status & 127) { $SIG{CHLD} = 'DEFAULT'; kill($status & 127, $$); exit(128 + ($status & 127)) }
      exit($status >> 8);
    }
    my $n = select(my $ready = $rin, undef, undef, 0.2);
    next unless defined $n && $n > 0;
    my $notif = "\0" x 80;
    next if syscall($ioctlNr, $listener, 0xc0502100, $notif) < 0;
    my ($id, $tid, undef, undef, undef, undef, $fd, $addr, $len) = unpack('Q L L l L Q Q Q Q', $notif);
    my $error = answer($listener, $id, $tid, $fd, $addr, $len, $port);
    syscall($ioctlNr, $listener, 0xc0182101, pack('Q q l L', $id, 0, -$error, 0));
  }
}
sub valid { my ($listener, $id) = @_; my $v = pack('Q', $id); syscall($ioctlNr, $listener, 0x40082102, $v) == 0 || syscall($ioctlNr, $listener, 0x80082102, $v) == 0 }
sub answer {
  my ($listener, $id, $tid, $fd, $addr, $len, $port) = @_;
  my $sa = '';
  if ($len >= 16 && $len <= 128 && open(my $mem, '<:raw', "/proc/$tid/mem")) {
    sysseek($mem, $addr, 0) and sysread($mem, $sa, $len >= 28 ? 28 : 16);
    close $mem;
  }
  return 13 unless length($sa) >= 16;
  my ($family, $to) = unpack('S n', $sa);
  my $target;
  if ($family == 2 && $to == $port && substr($sa, 4, 4) eq "\x7f\0\0\x01") {
    $target = pack('S n a4 x8', 2, $port, "\x7f\0\0\x01");
  } elsif ($family == 10 && length($sa) == 28 && $to == $port && substr($sa, 8, 16) eq ("\0" x 10) . "\xff\xff\x7f\0\0\x01") {
    $target = pack('S n L a16 L', 10, $port, 0, ("\0" x 10) . "\xff\xff\x7f\0\0\x01", 0);
  }
  return 13 unless defined $target;
  my $tgid;
  if (open(my $st, '<', "/proc/$tid/status")) { while (<$st>) { if (/^Tgid:\s+(\d+)/) { $tgid = $1; last } } close $st }
  return 13 unless defined $tgid;
  my $pidfd = syscall($pidfdOpen, $tgid + 0, 0);
  return 13 if $pidfd < 0;
  my $socket = syscall($pidfdGetfd, $pidfd, $fd + 0, 0);
  my $got = $! + 0;
  fdclose($pidfd);
  return $got || 9 if $socket < 0;
  my $error = 13;
  # The call must still be waiting: else the thread id may name another process by now.
  if (valid($listener, $id)) { $error = syscall($connectNr, $socket, $target, length $target) == 0 ? 0 : $! + 0 }
  fdclose($socket);
  return $error;
}
`;
