// config.json with a `sandbox` key (seed 004): read, parse and validate it in one place.
import { readFileSync } from 'node:fs';
import { SandboxValidationError, validate } from '@coda/sandbox-core';
import { z } from 'zod';
import { resolveSubprocessPolicy, type SubprocessPolicy } from '../policy/subprocess-policy.ts';

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

/** Fields whose new value gives commands more room than the old one. */
export function loosenedFields(before: SubprocessPolicy, after: SubprocessPolicy): string[] {
  const loosened: string[] = [];
  const more = (field: string, was: number, now: number): void => {
    if ((was > 0 && now === 0) || (was > 0 && now > was)) loosened.push(field);
  };
  if (before.enabled && !after.enabled) loosened.push('enabled');
  if (before.strict && !after.strict) loosened.push('strict');
  if (!before.allowNetwork && after.allowNetwork) loosened.push('allowNetwork');
  if (!before.allowFileWrites && after.allowFileWrites) loosened.push('allowFileWrites');
  if (before.restrictToDirectory !== after.restrictToDirectory)
    loosened.push('restrictToDirectory');
  if (before.allowedSyscalls !== undefined) {
    const allowed = new Set(before.allowedSyscalls);
    if (after.allowedSyscalls === undefined || after.allowedSyscalls.some((s) => !allowed.has(s))) {
      loosened.push('allowedSyscalls');
    }
  }
  if (
    before.runAs !== undefined &&
    (after.runAs?.uid !== before.runAs.uid || after.runAs?.gid !== before.runAs.gid)
  ) {
    loosened.push('runAs');
  }
  more('timeoutMs', before.timeoutMs, after.timeoutMs);
  more('maxMemoryMb', before.maxMemoryMb, after.maxMemoryMb);
  more('maxOutputBytes', before.maxOutputBytes, after.maxOutputBytes);
  if (after.allowedEnv.some((name) => !before.allowedEnv.includes(name)))
    loosened.push('allowedEnv');
  if (before.hidePaths.some((path) => !after.hidePaths.includes(path))) loosened.push('hidePaths');
  for (const key of ['cpuSecs', 'openFiles', 'processes', 'fileSizeBytes'] as const) {
    more(`rlimits.${key}`, before.rlimits[key], after.rlimits[key]);
  }
  return loosened;
}
