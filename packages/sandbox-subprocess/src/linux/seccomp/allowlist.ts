// The syscalls a sandboxed command may make, as data: moby's default seccomp profile
// (moby/profiles seccomp/default.json, the calls it allows a container without added
// capabilities) minus what a sandboxed command never needs (`removedFromMoby`, with why). Names
// an architecture does not have are skipped there. Calls safe only for some arguments are not
// here but in argument-rules.ts (preadv2 and madvise among them: RWF_NOWAIT and MADV_MERGEABLE are refused); everything else fails with EPERM (or ENOSYS, `probedSyscalls`).

/** One group of allowed syscalls and why a sandboxed command needs them. */
export interface SyscallGroup {
  /** Why a sandboxed command needs these calls. */
  readonly reason: string;
  /** Syscall names (an architecture that lacks one skips it). */
  readonly names: readonly string[];
}

/** Splits a whitespace-separated list of names (the groups below read as tables). */
function words(list: string): readonly string[] {
  return Object.freeze(list.trim().split(/\s+/));
}

/** The syscalls allowed with any arguments, by group. */
export const allowedSyscallGroups: readonly SyscallGroup[] = Object.freeze([
  {
    reason: 'reading files and directories inside the view (the view, not seccomp, decides which)',
    names: words(`
      read readv pread64 preadv lseek close close_range stat fstat lstat
      newfstatat statx statfs fstatfs access faccessat faccessat2 readlink readlinkat
      getdents getdents64 getcwd chdir fchdir fcntl flock dup dup2 dup3 fadvise64
      readahead getxattr lgetxattr fgetxattr getxattrat listxattr llistxattr flistxattr
      listxattrat
    `),
  },
  {
    reason: 'writing in the writable directory and private /tmp (read-only mounts refuse the rest)',
    names: words(`
      write writev pwrite64 pwritev pwritev2 truncate ftruncate fallocate fsync
      fdatasync sync_file_range syncfs mkdir mkdirat rmdir unlink unlinkat rename
      renameat renameat2 link linkat symlink symlinkat chown fchown fchownat lchown
      umask utime utimes utimensat futimesat setxattr lsetxattr fsetxattr setxattrat
      removexattr lremovexattr fremovexattr removexattrat copy_file_range sendfile
      splice tee vmsplice memfd_create
    `),
  },
  {
    reason: "the process's own memory (bounded by the memory cgroup and RLIMIT_MEMLOCK)",
    names: words(`
      brk mmap munmap mremap mprotect mincore msync mlock mlock2 munlock
      munlockall membarrier pkey_alloc pkey_free pkey_mprotect mseal map_shadow_stack
    `),
  },
  {
    reason: 'processes and threads inside the pid namespace (clone itself is argument-ruled)',
    names: words(`
      fork vfork execve execveat exit exit_group wait4 waitid kill tkill tgkill getpid
      getppid gettid getpgid setpgid getpgrp getsid setsid set_tid_address
      set_robust_list get_robust_list futex futex_waitv futex_wait futex_wake
      futex_requeue rseq arch_prctl pidfd_open pidfd_send_signal restart_syscall
      sched_yield sched_getaffinity sched_setaffinity sched_getparam sched_getscheduler
      sched_getattr sched_get_priority_max sched_get_priority_min sched_rr_get_interval
      getpriority setpriority ioprio_get getrlimit setrlimit prlimit64 getrusage times
    `),
  },
  {
    reason:
      'identity and capabilities: without capabilities these only lower them (setpriv uses them to drop)',
    names: words(`
      getuid geteuid getgid getegid getresuid getresgid getgroups setuid setgid setreuid
      setregid setresuid setresgid setfsuid setfsgid setgroups capget capset
    `),
  },
  {
    reason: 'confining itself further: a filter or ruleset added only narrows what is allowed',
    names: words(`
      seccomp landlock_create_ruleset landlock_add_rule landlock_restrict_self
    `),
  },
  {
    reason: 'signals and timers of its own',
    names: words(`
      rt_sigaction rt_sigprocmask rt_sigreturn rt_sigpending rt_sigsuspend
      rt_sigtimedwait rt_sigqueueinfo rt_tgsigqueueinfo sigaltstack signalfd signalfd4
      pause alarm getitimer setitimer clock_gettime clock_getres clock_nanosleep
      nanosleep gettimeofday time timer_create timer_delete timer_settime timer_gettime
      timer_getoverrun timerfd_create timerfd_settime timerfd_gettime
    `),
  },
  {
    reason: 'waiting on descriptors, pipes and file change notification',
    names: words(`
      poll ppoll select pselect6 epoll_create epoll_create1 epoll_ctl epoll_wait
      epoll_pwait epoll_pwait2 eventfd eventfd2 inotify_init inotify_init1
      inotify_add_watch inotify_rm_watch pipe pipe2
    `),
  },
  {
    reason:
      'sockets already created (socket() itself is argument-ruled by family, and connect/sendto with the network off)',
    names: words(`
      socketpair bind listen accept accept4 getsockname getpeername getsockopt
      setsockopt sendmsg sendmmsg recvfrom recvmsg recvmmsg shutdown
    `),
  },
  {
    reason: 'System V and POSIX IPC, private to the run (its own IPC namespace)',
    names: words(`
      msgget msgsnd msgrcv msgctl semget semop semtimedop semctl shmget shmat shmdt
      shmctl mq_open mq_unlink mq_timedsend mq_timedreceive mq_notify mq_getsetattr
    `),
  },
  {
    reason: 'facts about the machine every runtime reads at start',
    names: words(`
      uname sysinfo getrandom getcpu
    `),
  },
]);

/**
 * Calls moby's default profile allows that this filter refuses, and why a sandboxed command
 * does not need them. `extraSyscalls` can allow one back (logged; refused in strict mode).
 */
export const removedFromMoby: Readonly<Record<string, string>> = Object.freeze({
  ptrace: 'debugging other processes (moby allows it from kernel 4.8)',
  process_vm_readv: "reading another process's memory",
  process_vm_writev: "writing another process's memory",
  name_to_handle_at: 'file handles: with open_by_handle_at, a way around the mount view',
  adjtimex: "the host clock's discipline; a command never needs it",
  clock_adjtime: "the host clock's discipline; a command never needs it",
  fanotify_mark: 'fanotify_init is refused, so it has nothing to act on',
  cachestat: "the shared page cache's state of a file: a side channel on other tenants",
  sync: 'flushes every file system of the host: shared I/O one command could stall',
  mlockall: 'locks every future mapping; programs that need locking use mlock',
  memfd_secret: 'takes pages out of the kernel direct map; no command needs it',
  remap_file_pages: 'deprecated, emulated by the kernel, a history of bugs',
  process_mrelease: "reaps another process's memory",
  modify_ldt: 'x86 segment tables, for 16-bit code and Wine; a history of kernel bugs',
  get_thread_area: 'i386 thread storage, unused by x86_64 programs',
  set_thread_area: 'i386 thread storage, unused by x86_64 programs',
  sched_setattr: 'utilisation clamps and scheduling policies reach the shared CPU scheduler',
  sched_setscheduler: 'scheduling policies reach the shared CPU scheduler',
  sched_setparam: 'scheduling policies reach the shared CPU scheduler',
  ioprio_set: 'I/O priority on the shared disk queue',
  io_setup: 'kernel AIO contexts count against the host-wide aio-max-nr',
  io_destroy: 'kernel AIO (io_setup is refused)',
  io_submit: 'kernel AIO (io_setup is refused)',
  io_cancel: 'kernel AIO (io_setup is refused)',
  io_getevents: 'kernel AIO (io_setup is refused)',
  io_pgetevents: 'kernel AIO (io_setup is refused)',
  statmount: "mount details; /proc/self/mountinfo shows the run's own",
  listmount: "mount ids; /proc/self/mountinfo shows the run's own",
  epoll_ctl_old: 'never implemented by Linux',
  epoll_wait_old: 'never implemented by Linux',
});

/**
 * Calls refused with ENOSYS rather than EPERM: programs probe them and fall back to an older
 * call on ENOSYS (glibc: clone3 to clone; libuv: io_uring to threads; openat2 to openat). All
 * take what the filter would need to check in memory it cannot read (clone3's flags, openat2's
 * mode, io_uring's queued operations, which would bypass every rule here). moby allows openat2.
 */
export const probedSyscalls: readonly string[] = Object.freeze([
  'clone3',
  'openat2',
  'io_uring_setup',
  'io_uring_enter',
  'io_uring_register',
]);

/** Every name allowed with any arguments, in group order. */
export const plainAllowedSyscalls: readonly string[] = Object.freeze(
  allowedSyscallGroups.flatMap((group) => group.names),
);
