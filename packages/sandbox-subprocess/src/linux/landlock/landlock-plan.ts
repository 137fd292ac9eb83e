// The Landlock backend's half of a run: where bubblewrap cannot build namespaces (a container's
// seccomp profile, user namespaces refused), the wrapper execs the applier (applier-script.ts),
// after setpriv when a root host drops to the run's identity. The applier's instructions (the
// rules, the environment, the cwd, the command) follow the wrapper's on the same pipe, so none of
// them is on a host command line.
import { fstatSync } from 'node:fs';
import { SandboxUnavailableError } from '@coda/sandbox-core';
import { proxyEnvironment } from '../../egress/forwarder.ts';
import { SandboxControl, writesControl } from '../../process/controls.ts';
import type { LaunchRequest } from '../../process/launch-plan.ts';
import { type CheckedPath, isInside } from '../checked-path.ts';
import { perlPath, setprivPath } from '../detect.ts';
import { defaultFilesystemView, type HostPaths, sandboxHome } from '../filesystem-view.ts';
import { hostPaths } from '../host-paths.ts';
import type { Identity } from '../linux-plan.ts';
import { runAdditions } from '../run-paths.ts';
import { aarch64Syscalls } from '../seccomp/syscalls-aarch64.ts';
import { x86_64Syscalls } from '../seccomp/syscalls-x86-64.ts';
import { instructionsDescriptor, seccompDescriptor, startedDescriptor } from '../wrapper-shell.ts';
import { applierScript } from './applier-script.ts';
import { handledFsRights, Scope, scopeAbi, tcpAbi } from './landlock-abi.ts';
import {
  filesystemRules,
  type NetworkRules,
  networkRules,
  type PathRule,
  treeHost,
} from './landlock-rules.ts';

/** This architecture's syscall table (the applier needs prctl and close_range). */
const syscalls = process.arch === 'arm64' ? aarch64Syscalls : x86_64Syscalls;

/**
 * The applier's argv: perl, the script, and its descriptor and syscall numbers; with
 * `withStartByte` (a run, not the probe) the start descriptor it writes its last byte to.
 */
export function applierArgv(
  layout: { extraPipes: number },
  withSeccomp: boolean,
  withStartByte = false,
): string[] {
  return [
    perlPath!,
    '-e',
    applierScript,
    '--',
    String(instructionsDescriptor(layout)),
    String(withSeccomp ? seccompDescriptor(layout) : -1),
    String(3 + layout.extraPipes),
    String(syscalls.prctl),
    String(syscalls.close_range),
    String(withStartByte ? startedDescriptor(layout) : -1),
    ...(['seccomp', 'ioctl', 'connect', 'pidfd_open', 'pidfd_getfd', 'close'] as const).map(
      (name) => String(syscalls[name]),
    ),
  ];
}

/** The applier's instructions: Landlock's handled rights and rules, env, cwd, the command. */
export interface ApplierInstructions {
  readonly handledFs: number;
  readonly handledNet: number;
  readonly scoped: number;
  /** `pin`: `DEV:INO` of the file the host checked (a run's additions), to be found again. */
  readonly paths: readonly {
    readonly path: string;
    readonly access: number;
    readonly pin?: string | undefined;
  }[];
  readonly ports: readonly { readonly port: number; readonly access: number }[];
  /** A network allowlist: the proxy's port, the only place the supervisor connects sockets to. */
  readonly supervise?: number | undefined;
  readonly env: Readonly<Record<string, string>>;
  readonly cwd: string;
  readonly command: readonly string[];
}

/**
 * The rules with the identity (`DEV:INO`) of each path the host checked and pinned: the applier
 * opens paths by name, so it must find the same files (bubblewrap binds the pinned descriptor
 * itself; the applier, maybe already another uid, cannot open the host's /proc/PID/fd links).
 */
function pinned(
  rules: readonly PathRule[],
  pins: readonly CheckedPath[],
): ApplierInstructions['paths'] {
  const identities = new Map(
    pins.map((pin) => {
      const stats = fstatSync(pin.fd);
      return [pin.real, `${stats.dev}:${stats.ino}`] as const;
    }),
  );
  return rules.map((rule) => ({ ...rule, pin: identities.get(rule.path) }));
}

/** The instructions as the applier reads them: NUL-separated fields (no value holds a NUL). */
export function encodeInstructions(instructions: ApplierInstructions): string {
  const fields = [
    String(instructions.handledFs),
    String(instructions.handledNet),
    String(instructions.scoped),
    ...instructions.paths.flatMap((rule) => [
      'path',
      String(rule.access),
      rule.path,
      rule.pin ?? '',
    ]),
    ...instructions.ports.flatMap((rule) => ['port', String(rule.access), String(rule.port)]),
    ...(instructions.supervise === undefined ? [] : ['supervise', String(instructions.supervise)]),
    ...Object.entries(instructions.env).flatMap(([name, value]) => ['env', `${name}=${value}`]),
    'cwd',
    instructions.cwd,
    'exec',
    ...instructions.command,
  ];
  return fields.map((field) => `${field}\0`).join('');
}

/**
 * Refuses `allowUnixSockets` here: Landlock before ABI 9 (LANDLOCK_ACCESS_FS_RESOLVE_UNIX, not
 * used yet) does not check a connect or a datagram to a socket file, and the host's files stay
 * on the path, so letting connect through for the listed sockets would let it reach every
 * socket file the command's uid may write (a container engine's, a host service's).
 */
function refuseListedSockets(request: LaunchRequest, abi: number): void {
  if (request.unixSockets.length === 0) return;
  const reason = `under Landlock (ABI ${abi}) a command allowed to connect to one Unix socket file can connect to every one its uid may write`;
  throw new SandboxUnavailableError(
    `Refusing to run: allowUnixSockets needs a bubblewrap backend; ${reason}`,
    { details: { reason, confinement: 'landlock', field: 'allowUnixSockets' } },
  );
}

/**
 * Refuses a network allowlist below ABI 4: without TCP rules the run would have the host's
 * whole network, never only the proxy.
 */
function refuseEgressWithoutTcpRules(abi: number): void {
  if (abi >= tcpAbi) return;
  const reason = `Landlock ABI ${abi} has no TCP rules (ABI ${tcpAbi}, Linux 6.7): a command could connect anywhere, not only to the egress proxy`;
  throw new SandboxUnavailableError(
    `A network allowlist needs ${reason}; the command did not run`,
    {
      details: { reason, confinement: 'landlock', field: 'network' },
    },
  );
}

/**
 * The proxy variables of a Landlock run, pointing at the proxy's port on the host's loopback.
 * No NO_PROXY: the loopback here is the host's, which the run may not reach directly, so every
 * request goes to the proxy (and a refused one is in the report).
 */
function landlockProxyEnvironment(port: number): Record<string, string> {
  const { NO_PROXY: _upper, no_proxy: _lower, ...variables } = proxyEnvironment(port);
  return variables;
}

/** What {@link landlockArguments} gives the plan. */
export interface LandlockArguments {
  /** The wrapper's last step, as argv. */
  readonly exec: string[];
  /**
   * The applier's instructions, encoded; with a network allowlist, for the proxy's loopback
   * `proxyPort` (known once its listener is up, after the plan is made).
   */
  encode(proxyPort?: number): string;
}

/**
 * The wrapper's last step (`exec`, as argv) and the applier's instructions for `request` under
 * Landlock ABI `abi`; pushes what applies onto `controls`. The additions are checked and pinned
 * (into `pins`) as bubblewrap's are. With `egress` (a network allowlist) TCP connect is granted
 * to the proxy's port alone and the seccomp filter is `tcpClientOnly`.
 */
export function landlockArguments(
  request: LaunchRequest,
  identity: Identity,
  abi: number,
  controls: SandboxControl[],
  pins: CheckedPath[],
  host: HostPaths = hostPaths,
  egress = false,
): LandlockArguments {
  const { policy } = request;
  refuseListedSockets(request, abi);
  if (egress) refuseEgressWithoutTcpRules(abi);
  const additions = runAdditions(request, identity, pins, false, true);
  const network = (port: number): NetworkRules =>
    networkRules(
      egress ? { kind: 'proxy', port } : { kind: policy.allowNetwork ? 'on' : 'off' },
      abi,
    );
  const scoped = abi >= scopeAbi ? Scope.abstractUnixSocket | Scope.signal : 0;
  const cwd = request.cwd ?? '/';
  const paths = pinned(
    filesystemRules(defaultFilesystemView, additions, abi, treeHost(host, host === hostPaths)),
    pins,
  );
  const encode = (proxyPort = 0): string => {
    const rules = network(proxyPort);
    const proxy = egress ? landlockProxyEnvironment(proxyPort) : {};
    const instructions: ApplierInstructions = {
      handledFs: handledFsRights(abi),
      handledNet: rules.handled,
      scoped,
      paths,
      ports: rules.ports,
      supervise: egress ? proxyPort : undefined,
      // The proxy's variables last, so no caller's variable points a program elsewhere.
      env: { HOME: sandboxHome, ...request.env, ...proxy, PWD: cwd },
      cwd,
      command: [request.executable, ...request.args],
    };
    return encodeInstructions(instructions);
  };
  controls.push(SandboxControl.landlock, SandboxControl.landlockFilesystem);
  // A hidden path inside /proc stays visible (landlock-rules.ts): then the control is not claimed.
  const hidden = additions.hidden;
  if (hidden.length > 0 && !hidden.some((path) => isInside(path, '/proc'))) {
    controls.push(SandboxControl.hiddenPaths);
  }
  // From what the run can write: with allowFileWrites its private /tmp, home and /dev/shm are
  // writable even when no host directory is (an attack review found `no-file-writes` claimed
  // there, the same list as with writes refused).
  const writes = writesControl(additions.writable.length, policy.allowFileWrites);
  if (writes !== undefined) controls.push(writes);
  if (egress) controls.push(SandboxControl.landlockTcpProxyOnly, SandboxControl.egressProxy);
  else if (network(0).handled !== 0) controls.push(SandboxControl.landlockNoTcp);
  if (scoped !== 0) {
    controls.push(SandboxControl.landlockScopeAbstractUnix, SandboxControl.landlockScopeSignal);
  }
  // Every capability goes, whatever the identity: with CAP_SYS_PTRACE a Landlock domain may still
  // read other processes' /proc/PID/environ (seen on this project's kernel), and a uid 0 that
  // keeps its uid (a user namespace with one uid) would otherwise keep them all. Clearing the
  // inheritable set clears the ambient one; no_new_privs then keeps file capabilities from
  // granting any at execve. Only a root host may (and must) empty the bounding set too.
  const root = process.getuid?.() === 0;
  const drop = [
    setprivPath!,
    ...(identity.kind === 'drop'
      ? [`--reuid=${identity.uid}`, `--regid=${identity.gid}`, '--clear-groups']
      : []),
    '--inh-caps=-all',
    ...(root ? ['--bounding-set=-all'] : []),
    '--',
  ];
  controls.push(
    identity.kind === 'host' ? SandboxControl.hostIdentity : SandboxControl.unprivilegedIdentity,
    SandboxControl.capabilitiesDropped,
  );
  controls.push(
    SandboxControl.newSession,
    SandboxControl.noNewPrivileges,
    SandboxControl.seccomp,
    SandboxControl.inheritedDescriptorsClosed,
  );
  if (policy.allowedSyscalls !== undefined) controls.push(SandboxControl.seccompAllowlist);
  if (egress) controls.push(SandboxControl.seccompTcpClientOnly, SandboxControl.connectSupervised);
  else if (!policy.allowNetwork) {
    controls.push(SandboxControl.seccompNoInet);
    if (request.unixSockets.length === 0) controls.push(SandboxControl.seccompNoUnixConnect);
  }
  return { exec: [...drop, ...applierArgv(request, true, true)], encode };
}
