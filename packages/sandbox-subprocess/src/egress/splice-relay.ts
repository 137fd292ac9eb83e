// The byte mover shared by the forwarder inside a run and the host-side relay of the egress
// proxy: perl (perl-base is Essential on Debian; the package already needs it for the Landlock
// applier) moving both directions of a connection with splice(2) through a pipe per direction,
// so the bytes stay in the kernel (socket → pipe → socket, no copy through user space). Perl
// has no splice of its own; it calls it with syscall() and this architecture's number. Where
// splice is refused (EINVAL, ENOSYS, EPERM: an old kernel, a socket type without splice_read),
// that direction falls back to sysread/syswrite.
import { aarch64Syscalls } from '../linux/seccomp/syscalls-aarch64.ts';
import { x86_64Syscalls } from '../linux/seccomp/syscalls-x86-64.ts';

/** This architecture's syscall table, or undefined where the package has none. */
const syscalls =
  process.arch === 'arm64' ? aarch64Syscalls : process.arch === 'x64' ? x86_64Syscalls : undefined;

/**
 * The numbers perl's syscall() needs: splice(2) for the relays, recvmsg(2), sendmsg(2) and
 * prctl(2) for the host-side relay and the forwarder (descriptors passed over Unix sockets,
 * PR_SET_PDEATHSIG, PR_SET_DUMPABLE). 0 where none is known: the relays then copy with
 * read/write, the host-side relay is not used and the forwarder relays every connection.
 */
export const relaySyscalls: {
  readonly splice: number;
  readonly recvmsg: number;
  readonly sendmsg: number;
  readonly prctl: number;
} = {
  splice: syscalls?.splice ?? 0,
  recvmsg: syscalls?.recvmsg ?? 0,
  sendmsg: syscalls?.sendmsg ?? 0,
  prctl: syscalls?.prctl ?? 0,
};

/**
 * `local_leg($socket)`: the socket towards the client, always a local one (the host's loopback,
 * or the run's own namespace's), sends with Reno (TCP_CONGESTION; Reno is open to every user)
 * instead of the host's default when that is BBR: BBR paces with a timer per burst where no fq
 * qdisc does it, which on a loopback leg is pure cost (measured: a relayed 100 MB download
 * 1.21× faster, median of 20 paired rounds, 15 won). No effect on a Unix socket (it fails,
 * ignored); the server's leg keeps the host's choice. It also sets TCP_NODELAY: a relay passes
 * each write on as it comes, never holding a small one back for an ACK the client delays by
 * 40 ms (the proxy's own sockets have it for the same reason; egress-proxy.ts, accept).
 */
export const localLegSub = String.raw`
sub local_leg { setsockopt($_[0], 6, 13, 'reno'); setsockopt($_[0], 6, 1, 1) }
`;

/** Bytes one splice moves at most, and the pipe size asked for (F_SETPIPE_SZ) to hold them. */
export const relayChunkBytes = 1 << 20;

/**
 * `relay($x, $y, $counts, $label, $cap, $splice)`: moves bytes between sockets `$x` and `$y`
 * both ways until both directions ended, passing each end of file on as a half-close. When
 * `$counts` is a handle, writes `$label s N` (read from `$x`) or `$label r N` (read from `$y`)
 * for every chunk before passing it on. `$cap` (undef: none) is `{ budget, final, control }`:
 * the bytes it may pass on, both ways together; more arrive on the `control` handle as lines
 * `N` or `N final` (no more after it). Out of budget and not final, it stops reading until a
 * grant comes; final, it reads at most one byte past the budget, and when that byte comes it
 * passes the budget on, counts the byte (never passed on) and returns 3. Returns 0 when the
 * connection ended (a reset or a gone peer is an end), 2 when select failed.
 */
export const relaySub = String.raw`
use Fcntl qw(F_GETFL F_SETFL O_NONBLOCK);
sub relay {
  my ($x, $y, $counts, $label, $cap, $nr) = @_;
  local $SIG{PIPE} = 'IGNORE';
  fcntl($_, F_SETFL, fcntl($_, F_GETFL, 0) | O_NONBLOCK) for $x, $y;
  my @ways = map { way($nr, @$_) } [$x, $y, 's'], [$y, $x, 'r'];
  my $moved = 0;
  my $room = sub {
    return ${relayChunkBytes} unless $cap;
    my $left = $cap->{budget} - $moved + ($cap->{final} ? 1 : 0);
    return $left < ${relayChunkBytes} ? $left : ${relayChunkBytes};
  };
  while (my @live = grep { !$_->{done} } @ways) {
    my ($rin, $win) = ('', '');
    for (@live) {
      if ($_->{pending}) { vec($win, fileno($_->{to}), 1) = 1 }
      elsif ($room->() > 0) { vec($rin, fileno($_->{from}), 1) = 1 }
    }
    vec($rin, fileno($cap->{control}), 1) = 1 if $cap && $cap->{control};
    my $n = select(my $rout = $rin, my $wout = $win, undef, undef);
    if ($n < 0) { next if $!{EINTR}; return 2 }
    grant($cap) if $cap && $cap->{control} && vec($rout, fileno($cap->{control}), 1);
    for my $w (@live) {
      if (!$w->{pending}) {
        next unless vec($rout, fileno($w->{from}), 1);
        my $len = $room->();
        next if $len <= 0;
        my $got = fill($w, $len);
        if ($got < 0) { next if $!{EAGAIN} || $!{EINTR}; $got = 0 }
        if ($got == 0) { shutdown($w->{to}, 1); $w->{done} = 1; next }
        $moved += $got;
        my $over = $cap && $moved > $cap->{budget} ? $moved - $cap->{budget} : 0;
        syswrite($counts, "$label $w->{tag} " . ($got - $over) . "\n") if $counts && $got > $over;
        $w->{pending} = $got - $over;
        if ($over) {
          drain(@ways);
          syswrite($counts, "$label $w->{tag} $over\n") if $counts;
          return 3;
        }
      } elsif (!vec($wout, fileno($w->{to}), 1)) { next }
      return 0 unless flush($w);
    }
  }
  return 0;
}
sub grant {
  my ($cap) = @_;
  my $got = sysread($cap->{control}, my $text, 4096);
  if (!$got) { delete $cap->{control}; return }
  while ($text =~ /^(\d+)( final)?$/mg) { $cap->{budget} += $1; $cap->{final} = 1 if $2 }
}
sub drain {
  for my $w (@_) {
    while ($w->{pending}) {
      my $win = ''; vec($win, fileno($w->{to}), 1) = 1;
      select(undef, my $wout = $win, undef, undef);
      return unless flush($w);
    }
  }
}
sub way {
  my ($nr, $from, $to, $tag) = @_;
  my $w = { nr => $nr, from => $from, to => $to, tag => $tag, pending => 0, buf => '' };
  if ($nr && pipe(my $r, my $p)) {
    fcntl($p, 1031, ${relayChunkBytes});
    @$w{qw(pr pw)} = ($r, $p);
  }
  return $w;
}
sub fill {
  my ($w, $len) = @_;
  if ($w->{pr}) {
    my $n = syscall($w->{nr}, fileno($w->{from}), 0, fileno($w->{pw}), 0, $len, 3);
    return $n if $n == 0 && !urgent_mark($w, $len, \$n);
    return $n unless $n < 0 && ($!{EINVAL} || $!{ENOSYS} || $!{EPERM});
    delete @$w{qw(pr pw)};
  }
  my $n = sysread($w->{from}, $w->{buf}, $len);
  return defined $n ? $n : -1;
}
# splice(2) from TCP stops at urgent data (MSG_OOB) and returns 0, as at end of file: read(2)
# tells them apart, stepping over the urgent byte as Node's reads do. What it reads goes into the
# pipe (at most 64 KiB, which any pipe holds) so that the splice path carries on; \$n gets the count.
sub urgent_mark {
  my ($w, $len, $n) = @_;
  my $got = sysread($w->{from}, my $data, $len < 65536 ? $len : 65536);
  if (!defined $got) { $$n = -1; return 1 }
  return 0 if $got == 0;
  $$n = syswrite($w->{pw}, $data);
  return 1;
}
sub flush {
  my ($w) = @_;
  while ($w->{pending} > 0) {
    my $n = $w->{pr}
      ? syscall($w->{nr}, fileno($w->{pr}), 0, fileno($w->{to}), 0, $w->{pending}, 3)
      : syswrite($w->{to}, $w->{buf}, $w->{pending}, length($w->{buf}) - $w->{pending});
    $n = -1 unless defined $n;
    if ($n < 0) { return $!{EAGAIN} || $!{EINTR} ? 1 : 0 }
    $w->{pending} -= $n;
  }
  $w->{buf} = '';
  return 1;
}
`;
