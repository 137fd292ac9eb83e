// The default resolver against a real DNS server (this test's own, in private namespaces) and
// one that never answers: lookups it cannot finish must leave getaddrinfo's threads alone and
// end when cancelled.
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { hostsFileAddresses } from './system-lookup.ts';

const probe = fileURLToPath(new URL('../../test/support/dns-probe.ts', import.meta.url));

/** A veth pair, both ends up, whose one end holds a global IPv6 address: a host reaching IPv6. */
const globalIpv6 =
  'ip link add v0 type veth peer name v1 && ip link set v0 up && ip link set v1 up && ip -6 addr add 2001:db8:1::1/64 dev v0 nodad && ';

function runProbe(setup = ''): Promise<string> {
  const dir = mkdtempSync(join(tmpdir(), 'coda-dns-'));
  const resolvConf = join(dir, 'resolv.conf');
  writeFileSync(resolvConf, 'nameserver 127.0.0.77\n');
  const command = `ip link set lo up && ${setup}mount --bind "${resolvConf}" /etc/resolv.conf && exec "$0" "$1"`;
  return new Promise((resolve, reject) => {
    execFile(
      'unshare',
      ['-m', '-n', 'sh', '-c', command, process.execPath, probe],
      { timeout: 60_000 },
      (error, stdout, stderr) => {
        rmSync(dir, { recursive: true, force: true });
        if (error === null) resolve(stdout);
        else reject(new Error(`${error.message}\n${stderr}`));
      },
    );
  });
}

describe('systemLookup', () => {
  it('answers from DNS and the hosts file, and a stalled server costs the process nothing', async () => {
    const result = JSON.parse(await runProbe());
    expect(result.answered).toEqual([{ address: '192.0.2.10', family: 4 }]);
    // No global IPv6 address here: IPv4 first, as getaddrinfo orders it.
    expect(result.dual).toEqual([
      { address: '192.0.2.20', family: 4 },
      { address: '2001:db8::20', family: 6 },
    ]);
    expect(result.fromHostsFile).toContainEqual({ address: '127.0.0.1', family: 4 });
    expect(result.earlyOutcome).toBe('AbortError');
    expect(result.earlyAbortMs).toBeLessThan(1_000); // a query sent would wait 2 s at least
    // With getaddrinfo, the 20 stalled lookups held libuv's two DNS threads and this one waited
    // behind them for tens of seconds; alone it takes milliseconds. Bound generous for a loaded
    // two-core machine.
    expect(result.getaddrinfoMs).toBeLessThan(1_000);
    expect(result.outcomes).toEqual(['AbortError']);
    expect(result.abortMs).toBeLessThan(1_000);
  });

  it('puts IPv6 first on a host with a global IPv6 address, as getaddrinfo does', async () => {
    const result = JSON.parse(await runProbe(globalIpv6));
    expect(result.dual).toEqual([
      { address: '2001:db8::20', family: 6 },
      { address: '192.0.2.20', family: 4 },
    ]);
  });

  it('reads the hosts file: every address of the name, case-insensitive, comments ignored', () => {
    const hosts = [
      '127.0.0.1 localhost',
      '# 10.0.0.1 api.test',
      '10.0.0.2\tAPI.test api # the service',
      'fd00::2 api.test',
      'not-an-address api.test',
    ].join('\n');
    expect(hostsFileAddresses(hosts, 'api.test.')).toEqual([
      { address: '10.0.0.2', family: 4 },
      { address: 'fd00::2', family: 6 },
    ]);
    expect(hostsFileAddresses(hosts, 'other.test')).toEqual([]);
  });
});
