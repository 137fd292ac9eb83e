// In-process mode after isolated-vm's catastrophic error: the execution in flight ends with
// CRASH (it used to get no terminal event at all), later ones too, and dispose settles. In a
// child process, since this one could not exit normally afterwards.
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { expect, it } from 'vitest';

it('ends the execution in flight with CRASH, and every later one, and dispose settles', async () => {
  const script = fileURLToPath(new URL('./fixtures/in-process-catastrophe.ts', import.meta.url));
  const child = spawn(
    process.execPath,
    ['--no-node-snapshot', '--conditions=@coda/source', script],
    {
      stdio: ['ignore', 'pipe', 'ignore'],
    },
  );
  const lines: unknown[] = [];
  let buffered = '';
  await new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, 30_000);
    child.stdout.on('data', (chunk: Buffer) => {
      buffered += chunk.toString();
      const parts = buffered.split('\n');
      buffered = parts.pop() ?? '';
      for (const part of parts) lines.push(JSON.parse(part));
      if (lines.length === 3) {
        clearTimeout(timer);
        resolve();
      }
    });
  });
  child.kill('SIGKILL');
  expect(lines).toEqual([
    { label: 'in flight', type: 'error', code: 'CRASH' },
    { label: 'after', type: 'error', code: 'CRASH' },
    { label: 'disposed' },
  ]);
}, 40_000);
