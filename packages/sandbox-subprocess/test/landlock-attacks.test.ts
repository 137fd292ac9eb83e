// Published limits of Landlock, tried against the Landlock backend in a simulated container
// (test/fixtures/landlock-attacks.ts, judged on the host by each technique's effect). The table
// below is what must hold, written from the kernel's Landlock documentation (which rights ABI 7
// handles) and this package's seccomp rules, not from the code: `false` rows are the techniques
// that still get through, each a row of docs/security.md.
import { describe, expect, it } from 'vitest';
import { nodeIn } from './support/environments.ts';

const fixture = new URL('./fixtures/landlock-attacks.ts', import.meta.url).pathname;

/** Per technique: blocked or not, with why. */
const expected: Record<string, boolean> = {
  // Landlock checks the file reached, whatever the path or link that names it.
  procSelfRoot: true,
  procHostRoot: true, // and /proc/PID of the host needs ptrace access, refused across domains
  procHostFd: true,
  symlinkFromWritable: true,
  // Linking or renaming across directories needs REFER (ABI 2) at both ends.
  hardlinkIntoWritable: true,
  renameIntoWritable: true,
  hardlinkReadOnly: true,
  truncateReadOnly: true, // ABI 3
  // uid 0 kept owns /etc/shadow: only its absence from the rules keeps it out.
  shadowDirect: true,
  shadowProcRoot: true,
  shadowListEtc: true,
  // Not Landlock rights (ABI 7): mode, times and stat of any file the run's uid owns.
  chmodOutside: false,
  utimeOutside: false,
  statOutside: false,
  hostMem: true,
  ptraceHost: true, // seccomp denies ptrace; Landlock would too
  killHostGroup: true, // Landlock's signal scope (ABI 6), though the uid matches
  tcp6Connect: true, // seccomp: no AF_INET6 socket with the network off
  udpSend: true,
  rawSocket: true,
  packetSocket: true,
  unlistedSocket: true, // seccomp: no connect with no socket listed
  dgramSendto: true, // seccomp: no sendto with an address
  dgramSendmsg: true, // seccomp: no AF_UNIX datagram socket (sendmsg's address is in memory)
  listedSocket: true, // none listed here
};

interface Report {
  uid: number;
  confinement: string;
  success: boolean;
  code?: string;
  error?: string;
  outcomes: Record<string, { blocked: boolean; stderr: string }>;
}

const attack = async (environment: 'moby-root' | 'moby-nonroot', policy: object) =>
  JSON.parse(await nodeIn(environment, [fixture, JSON.stringify(policy)])) as Report;

describe('published Landlock techniques in a simulated container', () => {
  it.each([
    // uid 0 kept without capabilities: owns the system files.
    ['moby-root', { runAs: 'host' }, 0],
    // The host's own uid (a non-root container): owns the application's files.
    ['moby-nonroot', {}, 65534],
  ] as const)(
    'in %s %j: exactly the expected techniques are stopped',
    async (environment, policy, uid) => {
      const report = await attack(environment, policy);
      expect(report.uid).toBe(uid);
      expect(report.confinement).toBe('landlock');
      const blocked = Object.fromEntries(
        Object.entries(report.outcomes).map(([name, outcome]) => [name, outcome.blocked]),
      );
      expect(blocked).toEqual(expected);
    },
  );

  it('refuses allowUnixSockets: Landlock (ABI < 9) would let every socket file be reached', async () => {
    const report = await attack('moby-nonroot', { allowUnixSockets: 'LISTED' });
    expect(report).toMatchObject({ confinement: 'none', success: false, code: 'UNAVAILABLE' });
    expect(report.error).toMatch(
      /^Refusing to run: allowUnixSockets needs a bubblewrap backend; under Landlock \(ABI \d+\) a command allowed to connect to one Unix socket file can connect to every one its uid may write/,
    );
    for (const [name, outcome] of Object.entries(report.outcomes)) {
      expect({ name, blocked: outcome.blocked }).toEqual({ name, blocked: true });
    }
  });
});
