// The names of the controls a run can report as enforced. A control is listed only when it was
// actually applied to that run, so a caller can check for what it relies on.

/** Every control a result or process can list in `controls`. */
export const SandboxControl = {
  /** Ran under bubblewrap (Linux). */
  bubblewrap: 'bubblewrap',
  userNamespace: 'namespace:user',
  pidNamespace: 'namespace:pid',
  ipcNamespace: 'namespace:ipc',
  utsNamespace: 'namespace:uts',
  mountNamespace: 'namespace:mount',
  /** Own network namespace: no interfaces but loopback, nothing of the host's. */
  networkNamespace: 'namespace:net',
  /**
   * A network allowlist applied: the run's own network namespace with only a forwarder to the
   * host's egress proxy on loopback (bubblewrap), or TCP to the proxy's port only (Landlock);
   * the proxy checks every connection against the policy.
   */
  egressProxy: 'egress-proxy',
  /** The declared file-system view (an allowlist; see `defaultFilesystemView`). */
  filesystemView: 'filesystem-view',
  privateTmp: 'private-tmp',
  /** Writes allowed only inside the bound directory. */
  writableDirectory: 'writable-directory',
  /** No writable path at all. */
  noFileWrites: 'no-file-writes',
  hiddenPaths: 'hidden-paths',
  newSession: 'new-session',
  capabilitiesDropped: 'capabilities-dropped',
  noNewPrivileges: 'no-new-privileges',
  /** The generated seccomp allowlist (loaded: the command started under it). */
  seccomp: 'seccomp',
  /** The allowlist narrowed further by `allowedSyscalls`. */
  seccompAllowlist: 'seccomp-allowlist',
  /** `socket()` refused for every family but AF_UNIX. */
  seccompNoInet: 'seccomp-no-inet-sockets',
  /**
   * Every entry of the writable directories was checked after the run and no set-id bit is left
   * (seccomp refuses setting one; the check is the second line).
   */
  noSetIdFiles: 'no-setid-files',
  cleanEnvironment: 'clean-environment',
  /** Host-side helpers (the wrapper shell, bwrap, setpriv) started with no environment at all. */
  cleanHelpers: 'clean-helper-environment',
  /** Every descriptor beyond stdio, the extra pipes and the sandbox's own was closed first. */
  inheritedDescriptorsClosed: 'inherited-fds-closed',
  /**
   * A network allowlist under Landlock: `socket()` makes TCP streams only (no UDP, so no DNS
   * from inside; no AF_UNIX socket, so no host socket file reachable), `listen()` refused and
   * no TCP Fast Open send, the two ways past Landlock's TCP rules, and no socket bound to an
   * interface (`SO_BINDTODEVICE`, `SO_BINDTOIFINDEX`), which sent a connect to 127.0.0.1 out of
   * the uplink.
   */
  seccompTcpClientOnly: 'seccomp-tcp-client-only',
  /**
   * A network allowlist under Landlock: every `connect()` is decided by the run's supervisor
   * (seccomp user notification), which refuses any address but the proxy's 127.0.0.1:PORT and
   * connects the socket itself (Landlock's rule alone is per port, any address).
   */
  connectSupervised: 'seccomp-connect-supervised',
  /** `connect()` and addressed `sendto()` refused: no Unix socket reachable (network off). */
  seccompNoUnixConnect: 'seccomp-no-unix-connect',
  /** The command ran as a uid other than 0 on the host (dropped from root, or the host's own). */
  unprivilegedIdentity: 'identity:unprivileged',
  /** The command ran as the root host's own uid 0 (`runAs: 'host'`). */
  hostIdentity: 'identity:host',
  rlimitCpu: 'rlimit-cpu',
  rlimitNofile: 'rlimit-nofile',
  rlimitNproc: 'rlimit-nproc',
  rlimitFsize: 'rlimit-fsize',
  rlimitCore: 'rlimit-core',
  rlimitData: 'rlimit-data',
  memoryCgroupV2: 'memory:cgroup-v2',
  memoryCgroupV1: 'memory:cgroup-v1',
  /**
   * Socket buffers the command makes the kernel hold are bounded too, as verified for the run:
   * cgroup v2 charges them to the memory limit; cgroup v1 gets a TCP buffer limit of a quarter
   * of `maxMemoryMb` besides it (docs/security.md has the figures).
   */
  memorySocketBuffers: 'memory:socket-buffers',
  memoryRlimitData: 'memory:rlimit-data',
  memoryJobObject: 'memory:job-object',
  memoryUlimit: 'memory:ulimit',
  pidsCgroupV2: 'pids:cgroup-v2',
  pidsCgroupV1: 'pids:cgroup-v1',
  wallClockTimeout: 'wall-clock-timeout',
  /** Kill of the whole pid namespace (bubblewrap as its parent). */
  killPidNamespace: 'kill:pid-namespace',
  /** Kill of every process in the run's cgroup. */
  killCgroup: 'kill:cgroup',
  /** Kill of the command's process group (setsid daemons escape it). */
  killProcessGroup: 'kill:process-group',
  outputCap: 'output-cap',
  seatbelt: 'seatbelt',
  seatbeltNoNetwork: 'seatbelt:no-network',
  seatbeltNoWrites: 'seatbelt:write-restricted',
  jobObject: 'job-object',
  /** Ran under the Landlock backend (Linux, no namespace: where bubblewrap cannot run). */
  landlock: 'landlock',
  /**
   * Landlock file-system rules from the declared view: reads only beneath its read-only rows
   * (masked paths left out) and the run's additions, writes only in the writable directories.
   */
  landlockFilesystem: 'landlock:filesystem',
  /** Landlock refused every TCP bind and connect (ABI 4 or later, network off). */
  landlockNoTcp: 'landlock:no-tcp',
  /**
   * A network allowlist under Landlock (ABI 4 or later): every TCP bind refused, TCP connect
   * allowed to the egress proxy's port only (on any address: Landlock's rules are per port;
   * docs/security.md).
   */
  landlockTcpProxyOnly: 'landlock:tcp-proxy-port-only',
  /** Landlock kept abstract Unix sockets inside the run (ABI 6 or later). */
  landlockScopeAbstractUnix: 'landlock:scope-abstract-unix',
  /** Landlock refused signals to processes outside the run (ABI 6 or later). */
  landlockScopeSignal: 'landlock:scope-signal',
} as const;

/** One of the values of {@link SandboxControl}. */
export type SandboxControl = (typeof SandboxControl)[keyof typeof SandboxControl];

/**
 * The write control a Linux run earns: `writable-directory` when host directories are bound
 * writable, `no-file-writes` only when nothing at all is writable (without `allowFileWrites`
 * even the private /tmp, home and /dev/shm are read-only), none when only those private
 * directories take writes.
 */
export function writesControl(
  writableHostDirectories: number,
  allowFileWrites: boolean,
): SandboxControl | undefined {
  if (writableHostDirectories > 0) return SandboxControl.writableDirectory;
  return allowFileWrites ? undefined : SandboxControl.noFileWrites;
}
