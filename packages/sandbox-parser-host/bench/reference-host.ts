// The host side of the references, as seed 004 describes it: spawn a fresh child per call,
// write the request to stdin, read stdout to the end (subprocess.communicate), kill at the wall
// clock. The Python reference is the seed's own child; the Node one is the same design in Node.
import { execFileSync, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const children = {
  python: fileURLToPath(new URL('./fixtures/reference_child.py', import.meta.url)),
  node: fileURLToPath(new URL('./fixtures/reference_child.mjs', import.meta.url)),
};

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

/** One call of a reference: a fresh child of `runtime`; resolves to the parsed `{ ok, data | error }`. */
export function runReference(
  runtime: 'python' | 'node',
  parser: string,
  payload: unknown,
): Promise<unknown> {
  return new Promise((resolve, reject) => {
    const executable = runtime === 'python' ? python : process.execPath;
    const process_ = spawn(executable, [children[runtime]], {
      stdio: ['pipe', 'pipe', 'pipe'],
      env: {},
    });
    const chunks: Buffer[] = [];
    const timer = setTimeout(() => process_.kill('SIGKILL'), 10_000);
    process_.stdout.on('data', (chunk: Buffer) => chunks.push(chunk));
    process_.stderr.resume();
    process_.on('error', reject);
    process_.on('close', () => {
      clearTimeout(timer);
      try {
        resolve(JSON.parse(Buffer.concat(chunks).toString('utf8')));
      } catch (error) {
        reject(error);
      }
    });
    process_.stdin.end(
      JSON.stringify({
        parser,
        payload,
        kwargs: {},
        limits: { memory_bytes: 256 * 1024 * 1024, cpu_secs: 5 },
      }),
    );
  });
}
