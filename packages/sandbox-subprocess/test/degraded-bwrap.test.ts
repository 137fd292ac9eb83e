// Hosts where bubblewrap exists but the kernel or AppArmor refuses part of what it needs. The
// real bwrap runs behind a small script that injects the refusal those hosts print.
import { chmodSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { createSandbox, degradedWarning, SandboxControl } from '../src/index.ts';
import { python } from './support/helpers.ts';

const hostPath = process.env.PATH;
const dirs: string[] = [];

/** A PATH whose `bwrap` fails with `message` when `when` matches its arguments. */
function pathWithBwrap(when: 'network' | 'always', message: string): string {
  const bin = mkdtempSync(join(tmpdir(), 'coda-fake-bwrap-'));
  dirs.push(bin);
  const test = when === 'always' ? 'true' : '[ "$a" = --unshare-net ]';
  writeFileSync(
    join(bin, 'bwrap'),
    `#!/bin/sh\nfor a in "$@"; do if ${test}; then echo '${message}' >&2; exit 1; fi; done\nexec /usr/bin/bwrap "$@"\n`,
  );
  chmodSync(join(bin, 'bwrap'), 0o755);
  for (const tool of ['true', 'prlimit', 'setpriv'])
    symlinkSync(`/usr/bin/${tool}`, join(bin, tool));
  return bin;
}

afterEach(() => {
  process.env.PATH = hostPath;
});
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

describe('bubblewrap partly refused', () => {
  it('keeps the network off with seccomp alone when only the network namespace is refused', async () => {
    process.env.PATH = pathWithBwrap(
      'network',
      'bwrap: loopback: Failed RTM_NEWADDR: Operation not permitted',
    );
    let connections = 0;
    const server = createServer((socket) => {
      connections++;
      socket.end();
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as { port: number };
    try {
      const result = await createSandbox({ allowNetwork: false }).run(python, [
        '-c',
        `import socket\ntry:\n socket.create_connection(("127.0.0.1", ${port}), 2); print("connected")\nexcept OSError as e: print("blocked", e.errno)`,
      ]);
      expect(result.stdout).toBe('blocked 1\n');
      expect(result.sandboxApplied).toBe(true);
      expect(result.controls).toContain(SandboxControl.seccompNoInet);
      expect(result.controls).not.toContain(SandboxControl.networkNamespace);
      expect(connections).toBe(0);
    } finally {
      server.close();
    }
  });

  it('falls back to limits, with the reason, when user namespaces are refused', async () => {
    process.env.PATH = pathWithBwrap('always', 'bwrap: setting up uid map: Permission denied');
    const warnings: unknown[][] = [];
    const ignore = (): void => {};
    const logger = {
      debug: ignore,
      info: ignore,
      error: ignore,
      warn: (...args: unknown[]) => warnings.push(args),
    };
    const result = await createSandbox({}, { logger: logger as never }).run('/bin/echo', [
      'still runs',
    ]);
    expect(result).toMatchObject({ success: true, stdout: 'still runs\n', sandboxApplied: false });
    expect(warnings).toEqual([
      [
        {
          reason:
            'bwrap cannot create namespaces here: bwrap: setting up uid map: Permission denied',
        },
        degradedWarning,
      ],
    ]);
    const strict = await createSandbox({ strict: true }).run('/bin/echo', ['never']);
    expect(strict.error).toBe(
      'Refusing to run unconfined (strict policy): bwrap cannot create namespaces here: bwrap: setting up uid map: Permission denied',
    );
  });
});
