// Hosts where bubblewrap cannot run, simulated by the test setup (test/support/environments.ts):
// in each, the probe picks the backend this table expects, every escape the backend claims to
// stop is stopped, and what a run's `controls` claims is exactly what the escapes show.
import { describe, expect, it } from 'vitest';
import { degradedWarning } from '../src/index.ts';
import { type Environment, probeIn } from './support/environments.ts';

/** The backend each environment must get (written from the environments, not from the code). */
const expectedBackend: readonly {
  readonly environment: Exclude<Environment, 'old-container'>;
  readonly policy?: object;
  readonly backend: string;
  readonly uid: number;
  /** Escapes the policy itself opens (allowed on purpose), not stopped. */
  readonly allowed?: readonly string[];
}[] = [
  { environment: 'moby-root', backend: 'landlock', uid: 0 },
  // uid 0 kept, as a caller may ask: its capabilities must still go.
  { environment: 'moby-root', policy: { runAs: 'host' }, backend: 'landlock', uid: 0 },
  { environment: 'moby-nonroot', backend: 'landlock', uid: 65534 },
  // With a socket file allowed, seccomp lets connect() through: the listed socket connects, and
  // Landlock's scope alone keeps the abstract one out of reach.
  {
    environment: 'moby-nonroot',
    policy: { allowUnixSockets: ['PROBE_SOCKET'] },
    backend: 'landlock',
    uid: 65534,
    allowed: ['unixConnect'],
  },
  { environment: 'rootless', backend: 'bubblewrap-as-caller', uid: 0 },
  { environment: 'rootless-moby', backend: 'landlock', uid: 0 },
  { environment: 'userns-disabled', backend: 'landlock', uid: 1000 },
];

/** For each escape, the controls any one of which claims to stop it. */
const claims: Record<string, readonly string[]> = {
  readSecret: ['filesystem-view', 'landlock:filesystem'],
  writeOutside: ['filesystem-view', 'landlock:filesystem'],
  tcpConnect: ['namespace:net', 'seccomp-no-inet-sockets', 'landlock:no-tcp'],
  unixConnect: ['seccomp-no-unix-connect'],
  abstractConnect: ['namespace:net', 'seccomp-no-unix-connect', 'landlock:scope-abstract-unix'],
  signalHost: ['namespace:pid', 'landlock:scope-signal'],
  inheritedFds: ['inherited-fds-closed'],
  env: ['clean-environment'],
  hostEnviron: ['namespace:pid', 'capabilities-dropped'],
};

/** Escapes every confining backend must stop (Landlock and bubblewrap alike). */
const stoppedWhenConfined = Object.keys(claims);

const labelled = expectedBackend.map(
  (expected) =>
    [
      `${expected.environment}${expected.policy ? ` ${JSON.stringify(expected.policy)}` : ''}`,
      expected,
    ] as const,
);

describe.each(labelled)('in %s', (_label, expected) => {
  it(`runs under ${expected.backend} and stops every escape its controls claim`, async () => {
    const report = await probeIn(expected.environment, expected.policy);
    expect(report.uid).toBe(expected.uid);
    expect(report.fixtureFds).toEqual([30, 200]); // the host really holds the descriptors
    expect(report.confinement).toBe(expected.backend);
    expect(report.capabilities.confinement).toBe(expected.backend);
    expect(report.outcomes.writeInside?.blocked).toBe(false); // the writable directory works
    for (const attempt of expected.allowed ?? []) {
      expect({ attempt, blocked: report.outcomes[attempt]?.blocked }).toEqual({
        attempt,
        blocked: false,
      });
    }
    for (const attempt of stoppedWhenConfined.filter((name) => !expected.allowed?.includes(name))) {
      expect({ attempt, blocked: report.outcomes[attempt]?.blocked }).toEqual({
        attempt,
        blocked: true,
      });
      const claimed = claims[attempt]!.filter((control) => report.controls.includes(control));
      expect({ attempt, claimed: claimed.length > 0 }).toEqual({ attempt, claimed: true });
    }
  });
});

describe('in old-container (no namespaces, no Landlock)', () => {
  it('refuses every run by default, naming the option that opts down', async () => {
    const report = await probeIn('old-container');
    expect(report.uid).toBe(0);
    expect(report).toMatchObject({
      success: false,
      code: 'UNAVAILABLE',
      confinement: 'none',
      controls: [],
    });
    expect(report.error).toMatch(
      /^Refusing to run: the strongest confinement here is rlimits, below minimumConfinement "landlock" \(/,
    );
    expect(report.error).toContain(
      'landlock: the kernel offers no Landlock (landlock_create_ruleset: errno 38)',
    );
    expect(report.error).toContain("Set minimumConfinement: 'rlimits' to accept it");
    for (const outcome of Object.values(report.outcomes)) expect(outcome.stdout).toBe('');
    expect(report.capabilities.confinement).toBe('rlimits');
  });

  it("runs under rlimits with minimumConfinement: 'rlimits', and claims only what holds", async () => {
    const report = await probeIn('old-container', { minimumConfinement: 'rlimits' });
    expect(report.confinement).toBe('rlimits');
    expect(report.warnings).toEqual([
      [
        { reason: expect.stringContaining('landlock: the kernel offers no Landlock') },
        degradedWarning,
      ],
    ]);
    // Limits only: the host's files, network and processes are all reachable.
    const open = [
      'readSecret',
      'writeOutside',
      'tcpConnect',
      'unixConnect',
      'abstractConnect',
      'signalHost',
      'hostEnviron',
    ];
    const stopped = ['inheritedFds', 'env'];
    for (const attempt of open) {
      expect({ attempt, blocked: report.outcomes[attempt]?.blocked }).toEqual({
        attempt,
        blocked: false,
      });
    }
    for (const attempt of stopped) {
      expect({ attempt, blocked: report.outcomes[attempt]?.blocked }).toEqual({
        attempt,
        blocked: true,
      });
    }
    for (const attempt of Object.keys(claims)) {
      const claimed = claims[attempt]!.some((control) => report.controls.includes(control));
      expect({ attempt, claimed }).toEqual({ attempt, claimed: stopped.includes(attempt) });
    }
  });
});
