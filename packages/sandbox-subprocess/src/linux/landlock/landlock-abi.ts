// Landlock's access rights as the kernel numbers them (include/uapi/linux/landlock.h), and which
// of them each ABI version handles. A right the ABI does not know cannot be handled, so what a
// run gets depends on the host's ABI; the controls say which parts applied.

/** File-system access rights (`LANDLOCK_ACCESS_FS_*`). */
export const FsAccess = {
  execute: 1 << 0,
  writeFile: 1 << 1,
  readFile: 1 << 2,
  readDir: 1 << 3,
  removeDir: 1 << 4,
  removeFile: 1 << 5,
  makeChar: 1 << 6,
  makeDir: 1 << 7,
  makeReg: 1 << 8,
  makeSock: 1 << 9,
  makeFifo: 1 << 10,
  makeBlock: 1 << 11,
  makeSym: 1 << 12,
  /** ABI 2: link or rename a file into another directory. */
  refer: 1 << 13,
  /** ABI 3: truncate(2), ftruncate(2), open with O_TRUNC. */
  truncate: 1 << 14,
  /** ABI 5: ioctl(2) on a device file. */
  ioctlDev: 1 << 15,
} as const;

/** Network access rights (`LANDLOCK_ACCESS_NET_*`, ABI 4). */
export const NetAccess = { bindTcp: 1 << 0, connectTcp: 1 << 1 } as const;

/** Scopes (`LANDLOCK_SCOPE_*`, ABI 6): IPC that may not leave the run's Landlock domain. */
export const Scope = { abstractUnixSocket: 1 << 0, signal: 1 << 1 } as const;

/** Rights a rule may grant on a file that is not a directory (the kernel refuses the others). */
export const fileRights =
  FsAccess.execute | FsAccess.writeFile | FsAccess.readFile | FsAccess.truncate | FsAccess.ioctlDev;

/** Read and run: what a read-only row of the view grants. */
export const readRights = FsAccess.execute | FsAccess.readFile | FsAccess.readDir;

/** Every file-system right the ABI handles (all of them are refused unless a rule grants them). */
export function handledFsRights(abi: number): number {
  let rights = (1 << 13) - 1; // ABI 1: execute .. makeSym
  if (abi >= 2) rights |= FsAccess.refer;
  if (abi >= 3) rights |= FsAccess.truncate;
  if (abi >= 5) rights |= FsAccess.ioctlDev;
  return rights;
}

/** The first ABI that can refuse TCP bind and connect. */
export const tcpAbi = 4;
/** The first ABI that scopes abstract Unix sockets and signals. */
export const scopeAbi = 6;
