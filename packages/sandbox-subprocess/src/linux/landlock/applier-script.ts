// The program that confines a Landlock run from inside, just before the command starts: a Perl
// script, because perl-base is Essential on Debian and Ubuntu (so present in their container base
// images) and its `syscall()` reaches every call needed without a compiler or a prebuilt binary.
// Started with an empty environment (no PERL5LIB, PERL5OPT), it reads its instructions from a
// descriptor, then in this order: no_new_privs; a Landlock ruleset with one rule per path (and
// port); the cwd; landlock_restrict_self; every descriptor from `firstClosed` up closed but the
// start descriptor; the seccomp program installed; the start byte written to the start
// descriptor, then closed (the host's sign that the run is set up); the command's environment;
// execve. Nothing of the command runs
// before all of it applied; any failure exits 126 with the step named on stderr.

import { connectSupervisor } from './connect-supervisor.ts';
import { fileRights } from './landlock-abi.ts';

/**
 * The instructions, NUL-separated: handled fs rights, handled net rights, scopes (decimal), then
 * records `path ACCESS PATH PIN` (PIN `DEV:INO` of the file the host checked, or empty: then a
 * missing path is skipped), `port ACCESS PORT`, `supervise PORT` (a network allowlist: the
 * command's connects are decided by the supervisor of connect-supervisor.ts, which connects
 * them to 127.0.0.1:PORT only), `env NAME=VALUE`, `cwd DIR`, and last
 * `exec FILE ARG...`. A pinned path that now names another file (a component swapped for a
 * symlink or renamed since the check) fails the run. Arguments: instructions fd, seccomp fd (-1 for none), first fd to close,
 * this architecture's numbers of prctl and close_range (landlock's are 444-446 everywhere), and
 * the start descriptor (above the first fd to close; -1 for none, as for the probe), then the
 * numbers of seccomp, ioctl, connect, pidfd_open, pidfd_getfd and close (the supervisor's).
 * Numbers from @ARGV get `+ 0`: `syscall()` passes a string as a pointer.
 */
export const applierScript = String.raw`
my ($ifd, $sfd, $first, $prctl, $closeRange, $started, $seccompNr, $ioctlNr, $connectNr, $pidfdOpen, $pidfdGetfd, $closeNr) = map { $_ + 0 } @ARGV;
sub fail { my $e = $! + 0; print STDERR "coda-sandbox: landlock applier: $_[0] (errno $e)\n"; exit 126 }
sub slurp { open(my $h, '<&=', $_[0]) or fail("read fd $_[0]"); binmode $h; local $/; my $d = <$h>; close $h; $d }
my @f = split /\0/, slurp($ifd), -1;
pop @f if @f && $f[-1] eq '';
my $prog = $sfd >= 0 ? slurp($sfd) : '';
my ($fs, $net, $scoped) = splice(@f, 0, 3);
my (@rules, %env, $cwd, @argv, $supervise);
while (@f) {
  my $k = shift @f;
  if ($k eq 'path') { push @rules, [$k, shift @f, shift @f, shift @f] }
  elsif ($k eq 'port') { push @rules, [$k, shift @f, shift @f, ''] }
  elsif ($k eq 'supervise') { $supervise = shift(@f) + 0 }
  elsif ($k eq 'env') { my ($n, $v) = split /=/, shift(@f), 2; $env{$n} = $v }
  elsif ($k eq 'cwd') { $cwd = shift @f }
  elsif ($k eq 'exec') { @argv = @f; last }
  else { $! = 22; fail("unknown record $k") }
}
@argv or do { $! = 22; fail('no command') };
syscall($prctl, 38, 1, 0, 0, 0) == 0 or fail('prctl(PR_SET_NO_NEW_PRIVS)');
my $attr = pack('QQQ', $fs, $net, $scoped);
my $rs = syscall(444, $attr, length $attr, 0);
$rs >= 0 or fail('landlock_create_ruleset');
for my $r (@rules) {
  my ($k, $access, $target, $pin) = @$r;
  if ($k eq 'port') {
    syscall(445, $rs, 2, pack('QQ', $access, $target), 0) == 0 or fail("landlock_add_rule(port $target)");
    next;
  }
  sysopen(my $h, $target, 0x200000 | 0x80000) or do { next if $! + 0 == 2 && $pin eq ''; fail("open($target)") };
  if ($pin ne '') { my @s = stat($h); "$s[0]:$s[1]" eq $pin or do { $! = 116; fail("$target is not the file that was checked") } }
  my $mask = (-d $h ? $access : ($access & ${fileRights})) & $fs;
  if ($mask) { syscall(445, $rs, 1, pack('Ql', $mask, fileno($h)), 0) == 0 or fail("landlock_add_rule($target)") }
  close $h;
}
if (defined $cwd) { chdir $cwd or fail("chdir($cwd)") }
syscall(446, $rs, 0) == 0 or fail('landlock_restrict_self');
if ($started >= $first) {
  syscall($closeRange, $first, $started - 1, 0) == 0 or fail('close_range') if $started > $first;
  syscall($closeRange, $started + 1, 0xFFFFFFFF, 0) == 0 or fail('close_range');
} else {
  syscall($closeRange, $first, 0xFFFFFFFF, 0) == 0 or fail('close_range');
}
if (defined $supervise) {
  length $prog or do { $! = 22; fail('supervise without a filter') };
  supervise($supervise, $prog, $started);
} elsif (length $prog) {
  my $fprog = pack('S x6 Q', length($prog) / 8, unpack('Q', pack('p', $prog)));
  syscall($prctl, 22, 2, $fprog, 0, 0) == 0 or fail('prctl(PR_SET_SECCOMP)');
}
if ($started >= 0) {
  open(my $sh, '>&=', $started) or fail("start fd $started");
  syswrite($sh, 's') == 1 or fail('start byte');
  close $sh;
}
%ENV = %env;
exec { $argv[0] } @argv;
fail("execve($argv[0])");
${connectSupervisor}`;
