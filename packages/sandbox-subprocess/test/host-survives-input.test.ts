// A command that will not read its input must not end the host (attack review, stop 36).
// `run` listens for its stdin's errors; `spawn` handed the caller the raw streams, so a command
// that closed stdin (or an extra pipe) and exited while the host still wrote its input, as the
// spawn example in docs/subprocess.md does, made the write fail with EPIPE on a stream nobody
// listened to: Node's uncaught 'error' ended the host process, every other run with it
// (measured: "Error: write EPIPE", the host exits 1, on the first of three tries).
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { node } from './support/helpers.ts';

describe('input to a command that closed its stdin and exited', () => {
  it('leaves the host alive (stdin and an extra pipe, 64 MiB each, three times)', () => {
    const result = spawnSync(
      node,
      [
        '--conditions=@coda/source',
        join(import.meta.dirname, 'fixtures', 'input-to-gone-command.ts'),
      ],
      { cwd: join(import.meta.dirname, '..'), encoding: 'utf8', timeout: 60_000 },
    );
    expect({ status: result.status, stdout: result.stdout, stderr: result.stderr }).toEqual({
      status: 0,
      stdout: 'host alive\n',
      stderr: '',
    });
  });
});
