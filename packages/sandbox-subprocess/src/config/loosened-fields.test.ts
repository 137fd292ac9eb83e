// `loosenedFields` names every policy field a reload loosens: one case per field (typed over
// every key of the policy, so a new field does not compile without a case), plus tightenings.
import { describe, expect, it } from 'vitest';
import {
  resolveSubprocessPolicy,
  type SubprocessPolicy,
  type SubprocessPolicyInput,
} from '../policy/subprocess-policy.ts';
import { loosenedFields } from './config-file.ts';

/** One reload: the policy before, the policy after, and the names that must be reported. */
interface Case {
  readonly change: string;
  readonly before: SubprocessPolicyInput;
  /** Merged over `before`; `unset` drops optional fields (back to their default: none). */
  readonly after: SubprocessPolicyInput;
  readonly unset?: readonly ('restrictToDirectory' | 'allowedSyscalls' | 'runAs' | 'network')[];
  readonly loosened: readonly string[];
  /** Reported for the change undone (default none): "any change" fields are looser both ways. */
  readonly back?: readonly string[];
}

const cases: { readonly [K in keyof SubprocessPolicy]-?: readonly Case[] } = {
  enabled: [
    {
      change: 'turned off',
      before: { enabled: true },
      after: { enabled: false },
      loosened: ['enabled'],
    },
  ],
  strict: [
    {
      change: 'turned off',
      before: { strict: true },
      after: { strict: false },
      loosened: ['strict'],
    },
  ],
  minimumConfinement: [
    {
      change: 'lowered to rlimits',
      before: { minimumConfinement: 'landlock' },
      after: { minimumConfinement: 'rlimits' },
      loosened: ['minimumConfinement'],
    },
    {
      change: 'raised to bubblewrap (tighter)',
      before: { minimumConfinement: 'landlock' },
      after: { minimumConfinement: 'bubblewrap' },
      loosened: [],
      back: ['minimumConfinement'],
    },
  ],
  timeoutMs: [
    {
      change: 'raised',
      before: { timeoutMs: 1000 },
      after: { timeoutMs: 1001 },
      loosened: ['timeoutMs'],
    },
    {
      change: 'set to 0 (none)',
      before: { timeoutMs: 1000 },
      after: { timeoutMs: 0 },
      loosened: ['timeoutMs'],
    },
  ],
  maxMemoryMb: [
    {
      change: 'raised',
      before: { maxMemoryMb: 256 },
      after: { maxMemoryMb: 257 },
      loosened: ['maxMemoryMb'],
    },
    {
      change: 'set to 0 (none)',
      before: { maxMemoryMb: 256 },
      after: { maxMemoryMb: 0 },
      loosened: ['maxMemoryMb'],
    },
  ],
  allowNetwork: [
    {
      change: 'turned on',
      before: { allowNetwork: false },
      after: { allowNetwork: true },
      loosened: ['allowNetwork'],
    },
  ],
  allowFileWrites: [
    {
      change: 'turned on',
      before: { allowFileWrites: false },
      after: { allowFileWrites: true },
      loosened: ['allowFileWrites'],
    },
  ],
  restrictToDirectory: [
    {
      change: 'moved',
      before: { restrictToDirectory: '/srv/a' },
      after: { restrictToDirectory: '/srv/b' },
      loosened: ['restrictToDirectory'],
      back: ['restrictToDirectory'],
    },
    {
      change: 'moved to a parent',
      before: { restrictToDirectory: '/srv/a' },
      after: { restrictToDirectory: '/srv' },
      loosened: ['restrictToDirectory'],
      back: ['restrictToDirectory'],
    },
    {
      change: 'set',
      before: {},
      after: { restrictToDirectory: '/srv/a' },
      loosened: ['restrictToDirectory'],
      back: ['restrictToDirectory'],
    },
    {
      change: 'removed',
      before: { restrictToDirectory: '/srv/a' },
      after: {},
      unset: ['restrictToDirectory'],
      loosened: ['restrictToDirectory'],
      back: ['restrictToDirectory'],
    },
  ],
  allowedSyscalls: [
    {
      change: 'a syscall added',
      before: { allowedSyscalls: ['read', 'write'] },
      after: { allowedSyscalls: ['read', 'write', 'mkdir'] },
      loosened: ['allowedSyscalls'],
    },
    {
      change: 'one swapped for another',
      before: { allowedSyscalls: ['read', 'write'] },
      after: { allowedSyscalls: ['read', 'mkdir'] },
      loosened: ['allowedSyscalls'],
      back: ['allowedSyscalls'],
    },
    {
      change: 'the allowlist removed',
      before: { allowedSyscalls: ['read'] },
      after: {},
      unset: ['allowedSyscalls'],
      loosened: ['allowedSyscalls'],
    },
  ],
  extraSyscalls: [
    {
      change: 'a call the default refuses allowed',
      before: {},
      after: { extraSyscalls: ['ptrace'] },
      loosened: ['extraSyscalls'],
    },
  ],
  maxOutputBytes: [
    {
      change: 'raised',
      before: { maxOutputBytes: 1024 },
      after: { maxOutputBytes: 1025 },
      loosened: ['maxOutputBytes'],
    },
  ],
  allowedEnv: [
    {
      change: 'a name added',
      before: { allowedEnv: ['PATH'] },
      after: { allowedEnv: ['PATH', 'AWS_SECRET_ACCESS_KEY'] },
      loosened: ['allowedEnv'],
    },
  ],
  env: [
    {
      change: 'a variable added',
      before: { env: { A: '1' } },
      after: { env: { A: '1', LD_PRELOAD: '/tmp/evil.so' } },
      loosened: ['env'],
      back: ['env'],
    },
    {
      change: 'a value changed',
      before: { env: { PATH: '/usr/bin' } },
      after: { env: { PATH: '/tmp/evil:/usr/bin' } },
      loosened: ['env'],
      back: ['env'],
    },
    {
      change: 'a value set to the empty string',
      before: { env: { A: '1' } },
      after: { env: { A: '' } },
      loosened: ['env'],
      back: ['env'],
    },
    {
      change: 'a variable removed',
      before: { env: { PYTHONNOUSERSITE: '1' } },
      after: { env: {} },
      loosened: ['env'],
      back: ['env'],
    },
  ],
  rlimits: [
    {
      change: 'cpuSecs raised',
      before: { rlimits: { cpuSecs: 5 } },
      after: { rlimits: { cpuSecs: 6 } },
      loosened: ['rlimits.cpuSecs'],
    },
    {
      change: 'cpuSecs set to 0 (none)',
      before: { rlimits: { cpuSecs: 5 } },
      after: { rlimits: { cpuSecs: 0 } },
      loosened: ['rlimits.cpuSecs'],
    },
    {
      change: 'openFiles raised',
      before: { rlimits: { openFiles: 64 } },
      after: { rlimits: { openFiles: 65 } },
      loosened: ['rlimits.openFiles'],
    },
    {
      change: 'processes raised',
      before: { rlimits: { processes: 8 } },
      after: { rlimits: { processes: 9 } },
      loosened: ['rlimits.processes'],
    },
    {
      change: 'fileSizeBytes raised',
      before: { rlimits: { fileSizeBytes: 4096 } },
      after: { rlimits: { fileSizeBytes: 4097 } },
      loosened: ['rlimits.fileSizeBytes'],
    },
    {
      change: 'all four raised',
      before: { rlimits: { cpuSecs: 1, openFiles: 64, processes: 8, fileSizeBytes: 4096 } },
      after: { rlimits: { cpuSecs: 2, openFiles: 128, processes: 16, fileSizeBytes: 8192 } },
      loosened: [
        'rlimits.cpuSecs',
        'rlimits.openFiles',
        'rlimits.processes',
        'rlimits.fileSizeBytes',
      ],
    },
  ],
  hidePaths: [
    {
      change: 'one removed',
      before: { hidePaths: ['/root', '/srv/secret'] },
      after: { hidePaths: ['/root'] },
      loosened: ['hidePaths'],
    },
  ],
  readOnlyPaths: [
    {
      change: 'one added',
      before: { readOnlyPaths: ['/opt/tool'] },
      after: { readOnlyPaths: ['/opt/tool', '/home'] },
      loosened: ['readOnlyPaths'],
    },
  ],
  writablePaths: [
    {
      change: 'one added',
      before: { writablePaths: [] },
      after: { writablePaths: ['/var/cache/build'] },
      loosened: ['writablePaths'],
    },
  ],
  allowUnixSockets: [
    {
      change: 'one added',
      before: { allowUnixSockets: [] },
      after: { allowUnixSockets: ['/run/docker.sock'] },
      loosened: ['allowUnixSockets'],
    },
  ],
  network: [
    {
      change: 'set where allowNetwork decided',
      before: {},
      after: { network: { allow: ['api.example.com'] } },
      loosened: ['network'],
      back: ['network'],
    },
    {
      change: 'an allow entry added',
      before: { network: { allow: ['a.example'] } },
      after: { network: { allow: ['a.example', 'b.example'] } },
      loosened: ['network'],
    },
    {
      change: 'a deny entry removed',
      before: { network: { allow: ['*.example'], deny: ['x.example'] } },
      after: { network: { allow: ['*.example'] } },
      loosened: ['network'],
    },
    {
      change: 'allowPrivate turned on',
      before: { network: { allow: ['a.example'] } },
      after: { network: { allow: ['a.example'], allowPrivate: true } },
      loosened: ['network'],
    },
    {
      change: 'allowEncryptedClientHello turned on',
      before: { network: { allow: ['a.example'] } },
      after: { network: { allow: ['a.example'], allowEncryptedClientHello: true } },
      loosened: ['network'],
    },
    {
      change: 'the byte cap raised',
      before: { network: { allow: ['a.example'], maxEgressBytes: 10 } },
      after: { network: { allow: ['a.example'], maxEgressBytes: 11 } },
      loosened: ['network'],
    },
    {
      change: 'removed',
      before: { network: { allow: ['a.example'] } },
      after: {},
      unset: ['network'],
      loosened: ['network'],
      back: ['network'],
    },
  ],
  runAs: [
    {
      change: "set to 'host' (uid 0)",
      before: {},
      after: { runAs: 'host' },
      loosened: ['runAs'],
      back: ['runAs'],
    },
    {
      change: "from a user to 'host'",
      before: { runAs: { uid: 1000, gid: 1000 } },
      after: { runAs: 'host' },
      loosened: ['runAs'],
      back: ['runAs'],
    },
    {
      change: 'another uid',
      before: { runAs: { uid: 1000, gid: 1000 } },
      after: { runAs: { uid: 1001, gid: 1000 } },
      loosened: ['runAs'],
      back: ['runAs'],
    },
    {
      change: 'another gid',
      before: { runAs: { uid: 1000, gid: 1000 } },
      after: { runAs: { uid: 1000, gid: 1001 } },
      loosened: ['runAs'],
      back: ['runAs'],
    },
    {
      change: 'a user set',
      before: {},
      after: { runAs: { uid: 1000, gid: 1000 } },
      loosened: ['runAs'],
      back: ['runAs'],
    },
    {
      change: 'removed',
      before: { runAs: { uid: 1000, gid: 1000 } },
      after: {},
      unset: ['runAs'],
      loosened: ['runAs'],
      back: ['runAs'],
    },
  ],
};

function reload({ before, after, unset = [] }: Pick<Case, 'before' | 'after' | 'unset'>) {
  const old = resolveSubprocessPolicy(before);
  const merged: Record<string, unknown> = { ...resolveSubprocessPolicy(after, old) };
  for (const field of unset) delete merged[field];
  return { before: old, after: resolveSubprocessPolicy(merged as SubprocessPolicyInput) };
}

const rows = Object.entries(cases).flatMap(([field, list]) =>
  list.map((entry) => ({ ...entry, field })),
);

describe('loosenedFields', () => {
  it.each(rows)('$field $change: $loosened', (entry) => {
    const { before, after } = reload(entry);
    expect(loosenedFields(before, after)).toEqual(entry.loosened);
    // The way back tightens the field, except where any change counts as loosening.
    expect(loosenedFields(after, before)).toEqual(entry.back ?? []);
  });

  it('has at least one case for every field of the policy', () => {
    const full = resolveSubprocessPolicy({
      restrictToDirectory: '/srv',
      allowedSyscalls: ['read'],
      runAs: 'host',
      network: { allow: ['a.example'] },
    });
    expect(Object.keys(cases).sort()).toEqual(Object.keys(full).sort());
    for (const list of Object.values(cases)) expect(list.length).toBeGreaterThan(0);
  });

  it('lists nothing for a change that only tightens', () => {
    const { before, after } = reload({
      before: {
        enabled: false,
        strict: false,
        timeoutMs: 0,
        maxMemoryMb: 0,
        allowNetwork: true,
        allowFileWrites: true,
        allowedEnv: ['PATH', 'HOME', 'TERM'],
        env: { A: '1' },
        maxOutputBytes: 4096,
        rlimits: { cpuSecs: 0, openFiles: 1024, processes: 256, fileSizeBytes: 1 << 30 },
        hidePaths: ['/root'],
        readOnlyPaths: ['/opt/tool', '/home'],
        writablePaths: ['/var/cache/build'],
        allowUnixSockets: ['/run/a.sock', '/run/b.sock'],
        allowedSyscalls: ['read', 'write', 'exit_group'],
      },
      after: {
        enabled: true,
        strict: true,
        timeoutMs: 5000,
        maxMemoryMb: 128,
        allowNetwork: false,
        allowFileWrites: false,
        allowedEnv: ['PATH'],
        env: { A: '1' },
        maxOutputBytes: 1024,
        rlimits: { cpuSecs: 5, openFiles: 64, processes: 8, fileSizeBytes: 4096 },
        hidePaths: ['/root', '/srv/secret'],
        readOnlyPaths: ['/opt/tool'],
        writablePaths: [],
        allowUnixSockets: ['/run/a.sock'],
        allowedSyscalls: ['read', 'write'],
      },
    });
    expect(after).toMatchObject({ allowFileWrites: false, timeoutMs: 5000, writablePaths: [] });
    expect(loosenedFields(before, after)).toEqual([]);
    expect(loosenedFields(after, after)).toEqual([]);
    // The reverse loosens every one of these fields, reported in the table's order.
    expect(loosenedFields(after, before)).toEqual([
      'enabled',
      'strict',
      'timeoutMs',
      'maxMemoryMb',
      'allowNetwork',
      'allowFileWrites',
      'allowedSyscalls',
      'maxOutputBytes',
      'allowedEnv',
      'rlimits.cpuSecs',
      'rlimits.openFiles',
      'rlimits.processes',
      'rlimits.fileSizeBytes',
      'hidePaths',
      'readOnlyPaths',
      'writablePaths',
      'allowUnixSockets',
    ]);
  });

  it('lists nothing when only the order of a list changes', () => {
    const { before, after } = reload({
      before: {
        hidePaths: ['/a', '/b'],
        allowedEnv: ['PATH', 'HOME'],
        allowedSyscalls: ['read', 'write'],
      },
      after: {
        hidePaths: ['/b', '/a'],
        allowedEnv: ['HOME', 'PATH'],
        allowedSyscalls: ['write', 'read'],
      },
    });
    expect(loosenedFields(before, after)).toEqual([]);
  });
});
