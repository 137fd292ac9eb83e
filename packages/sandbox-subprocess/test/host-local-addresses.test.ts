// The host's own addresses include more than Node's list of interfaces: an address on an
// interface that is down (or up without carrier) and every address under a `local` route still
// take connections. The proxy must class all of them `host` (refused without allowPrivate).
// Each case runs in a private network namespace set up here with real `ip` commands, so the
// host's own routes are never touched.
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { node } from './support/helpers.ts';

const probe = fileURLToPath(new URL('./support/host-local-probe.ts', import.meta.url));

// The namespace: v0 is one end of a veth pair left down, holding one IPv4 and one IPv6
// address; lo carries an IPv4 and an IPv6 `local` range (AnyIP), as cloud forwarding rules do.
const setup = [
  'ip link set lo up',
  'ip link add v0 type veth peer name v1',
  'ip addr add 8.8.4.4/32 dev v0',
  'ip -6 addr add 2600:1f18::5/128 dev v0 nodad',
  'ip route add local 9.9.0.0/16 dev lo',
  'ip -6 route add local 2600:1f18:1::/96 dev lo',
].join(' && ');

function runInNamespace(addresses: string[]): Promise<string> {
  const command = `${setup} && exec "$0" --conditions=@coda/source "$@"`;
  return new Promise((resolve, reject) => {
    execFile(
      'unshare',
      ['-n', 'sh', '-c', command, node, probe, ...addresses],
      { timeout: 60_000 },
      (error, stdout, stderr) =>
        error === null ? resolve(stdout) : reject(new Error(`${error.message}\n${stderr}`)),
    );
  });
}

describe('addresses the host delivers to itself, beyond Node’s list', () => {
  it('refuses each as class host, and its server is never reached', async () => {
    const cases = ['8.8.4.4', '2600:1f18::5', '9.9.9.9', '2600:1f18:1::7'];
    const lines = (await runInNamespace(cases))
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line));
    expect(lines).toEqual(
      cases.map((address) => ({
        address,
        status: 'HTTP/1.1 403 Forbidden',
        denied: [{ reason: 'private-address', detail: `resolved to ${address} (host)` }],
        reached: false,
      })),
    );
  });
});
