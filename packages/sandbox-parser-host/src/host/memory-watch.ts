// A resident-memory watchdog for children that no cgroup bounds: polls the resident set of the
// child and its descendants in /proc and calls back once it passes the limit. It bounds what
// V8's heap limit does not (Buffers, ArrayBuffers, native memory), within one poll interval.
import { readFile } from 'node:fs/promises';

const pollMs = 20;

async function residentBytes(pid: number): Promise<number> {
  try {
    const status = await readFile(`/proc/${pid}/status`, 'latin1');
    const match = /VmRSS:\s+(\d+) kB/.exec(status);
    return match === null ? 0 : Number(match[1]) * 1024;
  } catch {
    return 0;
  }
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
    const sizes = await Promise.all(pids.map(residentBytes));
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
