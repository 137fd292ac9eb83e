// The host's uplink and a watcher on it, for the Landlock attacks that try to send a connect to
// the proxy out of the machine (attack-egress-landlock-device, -route): each test brings its own
// sniffer (a Python program on a packet socket, root) saying what it looks for.
import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { networkInterfaces } from 'node:os';
import { createInterface } from 'node:readline';
import { python } from './helpers.ts';

/** The interface of the host's IPv4 default route, with its index and IPv4 address. */
export function uplink(): { name: string; index: number; address: string } | undefined {
  const routes = readFileSync('/proc/net/route', 'utf8').split('\n').slice(1);
  const name = routes
    .map((line) => line.trim().split(/\s+/))
    .find((fields) => fields[1] === '00000000' && fields[0] !== undefined)?.[0];
  if (name === undefined || !existsSync(`/sys/class/net/${name}/ifindex`)) return undefined;
  const index = Number(readFileSync(`/sys/class/net/${name}/ifindex`, 'utf8'));
  const address = networkInterfaces()[name]?.find((entry) => entry.family === 'IPv4')?.address;
  return address === undefined ? undefined : { name, index, address };
}

/**
 * Starts `sniffer` on `device` and resolves once it watches. `seen()` stops it half a second
 * later (late retransmissions count too) and resolves with the one line it printed.
 */
export async function watchUplink(sniffer: string, device: string) {
  const watcher = spawn(python, ['-c', sniffer, device], { stdio: ['pipe', 'pipe', 'inherit'] });
  const lines = createInterface({ input: watcher.stdout! })[Symbol.asyncIterator]();
  await lines.next(); // ready
  const printed = lines.next().then((line) => String(line.value ?? ''));
  return {
    seen: async () => {
      await new Promise((resolve) => setTimeout(resolve, 500));
      watcher.stdin!.end();
      return printed;
    },
  };
}
