// The host side of the Python reference, as seed 004 describes it: spawn the child, write the
// request to stdin, read stdout to the end (subprocess.communicate), kill at the wall clock.
import { execFileSync, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const child = fileURLToPath(new URL('./fixtures/reference_child.py', import.meta.url));

/**
 * The interpreter both the reference and the parser host's Python children run: the system's
 * where there is one (a version manager's build under /root is unreadable to the sandbox user),
 * as its real executable (not a shim script), as `sys.executable` names it.
 */
export const python = execFileSync(
  existsSync('/usr/bin/python3') ? '/usr/bin/python3' : 'python3',
  ['-c', 'import sys; print(sys.executable)'],
  { encoding: 'utf8' },
).trim();

/** One call of the reference: resolves to the parsed `{ ok, data | error }`. */
export function runReference(parser: string, payload: unknown): Promise<unknown> {
  return new Promise((resolve, reject) => {
    const process = spawn(python, [child], { stdio: ['pipe', 'pipe', 'pipe'], env: {} });
    const chunks: Buffer[] = [];
    const timer = setTimeout(() => process.kill('SIGKILL'), 10_000);
    process.stdout.on('data', (chunk: Buffer) => chunks.push(chunk));
    process.stderr.resume();
    process.on('error', reject);
    process.on('close', () => {
      clearTimeout(timer);
      try {
        resolve(JSON.parse(Buffer.concat(chunks).toString('utf8')));
      } catch (error) {
        reject(error);
      }
    });
    process.stdin.end(
      JSON.stringify({
        parser,
        payload,
        kwargs: {},
        limits: { memory_bytes: 256 * 1024 * 1024, cpu_secs: 5 },
      }),
    );
  });
}
