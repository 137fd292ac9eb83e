// The environment a command sees: only what the policy allows, never the host's secrets.
import type { SubprocessPolicy } from '../policy/subprocess-policy.ts';

/** Host variables named in `allowedEnv`, then the policy's `env`, then per-call `extra`. */
export function commandEnvironment(
  policy: Pick<SubprocessPolicy, 'allowedEnv' | 'env'>,
  extra: Readonly<Record<string, string>> | undefined,
  host: NodeJS.ProcessEnv = process.env,
): Record<string, string> {
  const env: Record<string, string> = {};
  for (const name of policy.allowedEnv) {
    const value = host[name];
    if (value !== undefined) env[name] = value;
  }
  return Object.assign(env, policy.env, extra);
}
