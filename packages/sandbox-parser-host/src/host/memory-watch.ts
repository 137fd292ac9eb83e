// A memory watchdog for children that no cgroup bounds: polls the child and its descendants in
// /proc and calls back once they pass the limit. It counts what V8's heap limit does not
// (Buffers, ArrayBuffers, native memory) and part of what the kernel holds for them: page tables
// and the bytes queued on their TCP and UDP sockets. Pipe and Unix socket buffers are not
// visible per process in /proc: docs/security.md gives that figure.
import { readdir, readFile, readlink } from 'node:fs/promises';

const pollMs = 20;
/** The socket tables of a process's network namespace whose queues are counted. */
const socketTables = ['tcp', 'tcp6', 'udp', 'udp6'];

/** Resident memory plus page tables of `pid`, in bytes (0 once it is gone). */
async function processBytes(pid: number): Promise<number> {
  try {
    const status = await readFile(`/proc/${pid}/status`, 'latin1');
    const kib = (field: string): number =>
      Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? 0);
    return (kib('VmRSS') + kib('VmPTE')) * 1024;
  } catch {
    return 0;
  }
}

/** Bytes queued (to send and to read) on the TCP and UDP sockets `pid` holds. */
async function socketQueueBytes(pid: number): Promise<number> {
  const inodes = new Set<string>();
  try {
    for (const fd of await readdir(`/proc/${pid}/fd`)) {
      const target = await readlink(`/proc/${pid}/fd/${fd}`).catch(() => '');
      const inode = /^socket:\[(\d+)\]$/.exec(target)?.[1];
      if (inode !== undefined) inodes.add(inode);
    }
  } catch {
    return 0;
  }
  if (inodes.size === 0) return 0;
  let total = 0;
  for (const table of socketTables) {
    const text = await readFile(`/proc/${pid}/net/${table}`, 'latin1').catch(() => '');
    for (const line of text.split('\n').slice(1)) {
      // sl local remote st tx_queue:rx_queue tr:when retrnsmt uid timeout inode ...
      const fields = line.trim().split(/\s+/);
      if (fields.length < 10 || !inodes.has(fields[9]!)) continue;
      const [tx = '0', rx = '0'] = fields[4]!.split(':');
      total += Number.parseInt(tx, 16) + Number.parseInt(rx, 16);
    }
  }
  return total;
}

async function descendants(pid: number): Promise<number[]> {
  try {
    const text = await readFile(`/proc/${pid}/task/${pid}/children`, 'latin1');
    const children = text.split(' ').filter(Boolean).map(Number);
    const nested = await Promise.all(children.map(descendants));
    return [...children, ...nested.flat()];
  } catch {
    return [];
  }
}

/** Polls `pid` and its descendants until stopped; calls `onExceeded` once with the figure. */
export function watchMemory(
  pid: number,
  limitBytes: number,
  onExceeded: (residentBytes: number) => void,
): () => void {
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  const poll = async (): Promise<void> => {
    const pids = [pid, ...(await descendants(pid))];
    const sizes = await Promise.all(
      pids.map(async (each) => (await processBytes(each)) + (await socketQueueBytes(each))),
    );
    const total = sizes.reduce((sum, size) => sum + size, 0);
    if (stopped) return;
    if (total > limitBytes) {
      stopped = true;
      onExceeded(total);
      return;
    }
    timer = setTimeout(() => void poll(), pollMs);
    timer.unref();
  };
  timer = setTimeout(() => void poll(), pollMs);
  timer.unref();
  return () => {
    stopped = true;
    clearTimeout(timer);
  };
}
