// Hosts where bubblewrap exists but the kernel or AppArmor refuses part of what it needs. The
// real bwrap runs behind a small script that injects the refusal those hosts print.
import { createServer } from 'node:net';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { createSandbox, SandboxControl } from '../src/index.ts';
import { pathWithBwrap, removeFakeBwraps } from './support/fake-bwrap.ts';
import { python } from './support/helpers.ts';

const hostPath = process.env.PATH;
afterEach(() => {
  process.env.PATH = hostPath;
});
afterAll(removeFakeBwraps);

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

  it('runs under Landlock, with the reasons, when user namespaces are refused', async () => {
    process.env.PATH = pathWithBwrap('always', 'bwrap: setting up uid map: Permission denied');
    const warnings: unknown[][] = [];
    const ignore = (): void => {};
    const logger = {
      debug: ignore,
      info: ignore,
      error: ignore,
      warn: (...args: unknown[]) => warnings.push(args),
    };
    const sandbox = createSandbox({}, { logger: logger as never });
    const result = await sandbox.run('/bin/echo', ['still runs']);
    expect(result).toMatchObject({
      success: true,
      stdout: 'still runs\n',
      sandboxApplied: true,
      confinement: 'landlock',
    });
    expect(result.controls).toContain(SandboxControl.landlockFilesystem);
    expect(warnings).toEqual([]); // confined: nothing degraded to limits only
    const refused =
      'bwrap cannot create namespaces here: bwrap: setting up uid map: Permission denied';
    const reasons =
      process.getuid?.() === 0
        ? `bubblewrap: ${refused}; bubblewrap as the caller: ${refused}`
        : `bubblewrap: ${refused}`;
    expect(sandbox.capabilities()).toMatchObject({ confinement: 'landlock', reason: reasons });
    const strict = await createSandbox({ strict: true }).run('/bin/echo', ['never']);
    expect(strict.error).toBe(
      `Refusing to run under landlock (strict policy needs bubblewrap): ${reasons}`,
    );
    const bwrapOnly = await createSandbox({ minimumConfinement: 'bubblewrap' }).run('/bin/echo', [
      'never',
    ]);
    expect(bwrapOnly).toMatchObject({ success: false, code: 'UNAVAILABLE', stdout: '' });
    expect(bwrapOnly.error).toBe(
      `Refusing to run: the strongest confinement here is landlock, below minimumConfinement "bubblewrap" (${reasons}). Set minimumConfinement: 'landlock' to accept it.`,
    );
  });
});
