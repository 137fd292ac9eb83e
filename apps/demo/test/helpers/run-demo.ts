// Runs the demo CLI as a user would (what `pnpm demo` runs, without pnpm) in a child process.
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const run = promisify(execFile);
const appDirectory = fileURLToPath(new URL('../..', import.meta.url));

/** Runs the demo with `args`; never throws on a non-zero exit. REDIS_URL is unset unless given. */
export async function demo(args: string[], env: NodeJS.ProcessEnv = {}) {
  const argv = ['--conditions=@coda/source', '--no-node-snapshot', 'src/main.ts', ...args];
  try {
    const { stdout, stderr } = await run(process.execPath, argv, {
      cwd: appDirectory,
      env: { ...process.env, REDIS_URL: '', ...env },
      maxBuffer: 16 * 1024 * 1024,
      timeout: 150_000,
    });
    return { code: 0, stdout, stderr };
  } catch (error) {
    const failed = error as { code?: number; stdout?: string; stderr?: string };
    return { code: failed.code ?? -1, stdout: failed.stdout ?? '', stderr: failed.stderr ?? '' };
  }
}
