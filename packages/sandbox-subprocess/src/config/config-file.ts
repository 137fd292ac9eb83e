// config.json with a `sandbox` key: read, parse and validate it in one place.
import { readFileSync } from 'node:fs';
import { SandboxValidationError, validate } from '@coda/sandbox-core';
import { z } from 'zod';
import {
  type Rlimits,
  resolveSubprocessPolicy,
  type SubprocessPolicy,
} from '../policy/subprocess-policy.ts';
import { linuxBackends } from '../process/confinement.ts';

const ConfigFileSchema = z.looseObject({ sandbox: z.record(z.string(), z.unknown()) });

/**
 * Reads `path` and returns the policy its `sandbox` key describes, over the defaults. Other
 * keys of the file are ignored. Throws `SandboxValidationError` naming each bad field (paths
 * start with `sandbox.`), also for unreadable files and broken JSON.
 */
export function loadSandboxConfig(path: string): SubprocessPolicy {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    throw fileError(
      path,
      `cannot read the file (${(error as NodeJS.ErrnoException).code ?? 'error'})`,
    );
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (error) {
    throw fileError(path, `not valid JSON (${(error as Error).message})`);
  }
  const file = validate(ConfigFileSchema, json, `config file ${path}`);
  try {
    return resolveSubprocessPolicy(file.sandbox as never);
  } catch (error) {
    if (!(error instanceof SandboxValidationError)) throw error;
    const issues = error.issues.map((issue) => ({ ...issue, path: `sandbox.${issue.path}` }));
    throw new SandboxValidationError(
      `Invalid config file ${path}: ${issues.map((i) => `${i.path}: ${i.message} (got ${i.received})`).join('; ')}`,
      { issues },
    );
  }
}

function fileError(path: string, message: string): SandboxValidationError {
  return new SandboxValidationError(`Invalid config file ${path}: ${message}`, {
    issues: [{ path: '', message, received: JSON.stringify(path) }],
  });
}

/**
 * How to tell that one field of a reloaded policy gives commands more room than before: true
 * when it loosened, or (for a group such as `rlimits`) the names of the loosened members.
 */
type Loosens<T> = (before: T, after: T) => boolean | readonly string[];

/** A limit where 0 means none: looser when raised, or when set to 0 from a real limit. */
const limitRaised = (before: number, after: number): boolean =>
  before !== 0 && (after === 0 || after > before);
const turnedOff = (before: boolean, after: boolean): boolean => before && !after;
const turnedOn = (before: boolean, after: boolean): boolean => !before && after;
const added = (before: readonly string[], after: readonly string[]): boolean =>
  after.some((item) => !before.includes(item));
const removed = (before: readonly string[], after: readonly string[]): boolean =>
  before.some((item) => !after.includes(item));

/** A rule for every key of `T`, optional ones included (`-?`): none can be left out. */
type RuleTable<T> = { readonly [K in keyof T]-?: Loosens<T[K]> };

/** One entry per rlimit, named `rlimits.<key>` when it loosened. */
const rlimitRules: RuleTable<Rlimits> = {
  cpuSecs: limitRaised,
  openFiles: limitRaised,
  processes: limitRaised,
  fileSizeBytes: limitRaised,
};

/**
 * One entry per policy field, in the order loosened fields are reported. Typed over every key
 * of the policy (optional ones included), so a field added to the policy does not compile until
 * it has a rule here.
 */
const looseningRules: RuleTable<SubprocessPolicy> = {
  enabled: turnedOff,
  strict: turnedOff,
  // A weaker backend accepted: later in the strongest-first order.
  minimumConfinement: (before, after) =>
    linuxBackends.indexOf(after) > linuxBackends.indexOf(before),
  timeoutMs: limitRaised,
  maxMemoryMb: limitRaised,
  allowNetwork: turnedOn,
  allowFileWrites: turnedOn,
  // Another directory is other files to write, whichever way it changed.
  restrictToDirectory: (before, after) => before !== after,
  // No allowlist allows every call; otherwise a name the old list did not have.
  allowedSyscalls: (before, after) =>
    before !== undefined && (after === undefined || added(before, after)),
  extraSyscalls: added,
  maxOutputBytes: (before, after) => after > before,
  allowedEnv: added,
  // Any difference: an added or changed value can inject LD_PRELOAD, PATH and the like, and a
  // removed one can drop a hardening variable or let the host's value through `allowedEnv`.
  env: (before, after) =>
    Object.keys(before).some((name) => !Object.hasOwn(after, name)) ||
    Object.entries(after).some(
      ([name, value]) => !Object.hasOwn(before, name) || before[name] !== value,
    ),
  rlimits: (before, after) =>
    (Object.keys(rlimitRules) as (keyof Rlimits)[])
      .filter((key) => rlimitRules[key](before[key], after[key]) === true)
      .map((key) => `rlimits.${key}`),
  hidePaths: removed,
  readOnlyPaths: added,
  writablePaths: added,
  allowUnixSockets: added,
  // Setting or removing an egress policy changes what is reachable either way; within one, a
  // new allow entry, a dropped deny entry, private addresses, encrypted ClientHellos or a larger
  // (or no) byte cap.
  network: (before, after) => {
    if (before === undefined || after === undefined) return before !== after;
    const cap = (policy: typeof before): number =>
      policy.maxEgressBytes ?? Number.POSITIVE_INFINITY;
    return (
      added(before.allow, after.allow) ||
      removed(before.deny ?? [], after.deny ?? []) ||
      (!(before.allowPrivate ?? false) && (after.allowPrivate ?? false)) ||
      (!(before.allowEncryptedClientHello ?? false) &&
        (after.allowEncryptedClientHello ?? false)) ||
      cap(after) > cap(before)
    );
  },
  // Any change of identity: 'host' (uid 0), another uid or gid, or unset (the default user).
  runAs: (before, after) =>
    typeof before === 'object' && typeof after === 'object'
      ? before.uid !== after.uid || before.gid !== after.gid
      : before !== after,
};

/** Fields whose new value gives commands more room than the old one, in a fixed order. */
export function loosenedFields(before: SubprocessPolicy, after: SubprocessPolicy): string[] {
  const loosened: string[] = [];
  for (const field of Object.keys(looseningRules) as (keyof SubprocessPolicy)[]) {
    const rule = looseningRules[field] as Loosens<unknown>;
    const verdict = rule(before[field], after[field]);
    if (verdict === true) loosened.push(field);
    else if (verdict !== false) loosened.push(...verdict);
  }
  return loosened;
}
