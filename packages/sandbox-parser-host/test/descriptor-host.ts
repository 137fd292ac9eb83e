// A host process for the descriptor test. The test starts it with a secret file open as fd 30
// and fd 200, which Node leaves without close-on-exec (as a host inherits descriptors from
// whatever started it), so every child it spawns inherits them. It reports what it holds
// itself, runs one `readDescriptors` call (argv[2]: `none` or `default` confinement; argv[3]:
// `python` for the Python runner's `read_descriptors`) and prints both as JSON.
import { readFileSync, readSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { createParserHost } from '../src/index.ts';

const closeOnExec = 0o2000000;
const inherited: Record<number, { text: string; closeOnExec: boolean }> = {};
for (const fd of [30, 200]) {
  const buffer = Buffer.alloc(64);
  const text = buffer.subarray(0, readSync(fd, buffer, 0, buffer.length, 0)).toString();
  const flags = /^flags:\s*([0-7]+)$/m.exec(readFileSync(`/proc/self/fdinfo/${fd}`, 'latin1'));
  inherited[fd] = {
    text,
    closeOnExec: (Number.parseInt(flags?.[1] ?? '0', 8) & closeOnExec) !== 0,
  };
}

const python = process.argv[3] === 'python';
await using host = createParserHost({
  module: fileURLToPath(
    new URL(python ? './fixtures/python/attacks.py' : './fixtures/escapes.mjs', import.meta.url),
  ),
  ...(python ? { python: process.argv[4] } : {}),
  warmSpare: false,
  ...(process.argv[2] === 'none' ? { confinement: 'none' as const } : {}),
});
const result = await host.runParser(python ? 'read_descriptors' : 'readDescriptors', null);
process.stdout.write(JSON.stringify({ inherited, result }));
