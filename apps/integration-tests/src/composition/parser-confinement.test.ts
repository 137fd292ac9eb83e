// The parser host confined by the subprocess layer (bubblewrap, seccomp, cgroup): a parser, or a
// payload that took it over, cannot reach the network or write a file, and every result says
// which controls applied.
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { createParserHost } from '@coda/sandbox-parser-host';
import { SandboxControl } from '@coda/sandbox-subprocess';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { feedParsersPath } from '../support/parsers.ts';
import { startTrapServer, type TrapServer } from '../support/servers.ts';

// `required`: a call that cannot be confined is refused rather than run with less.
const host = createParserHost({
  module: feedParsersPath,
  confinement: 'required',
  warmSpare: false,
});
let trap: TrapServer;
let dir: string;
beforeAll(async () => {
  trap = await startTrapServer();
  // Under /var/tmp: a write that escaped confinement would land on the host here.
  dir = mkdtempSync(join('/var/tmp', 'coda-parser-escape-'));
});
afterAll(async () => {
  await host.close();
  await trap.close();
  rmSync(dir, { recursive: true, force: true });
});

const confinedControls = [
  SandboxControl.bubblewrap,
  SandboxControl.networkNamespace,
  SandboxControl.seccomp,
  SandboxControl.seccompNoInet,
  SandboxControl.filesystemView,
  SandboxControl.noFileWrites,
  SandboxControl.cleanEnvironment,
];

describe('parser host under the subprocess layer', () => {
  it('a well-formed feed parses, and the result lists the controls that applied', async () => {
    const result = await host.runParser('parseFeed', 'cpu,1\nmem,2\ncpu,3\n');
    expect(result).toMatchObject({ ok: true, data: { cpu: 4, mem: 2 }, exitCode: 0 });
    expect(result.confinement).toMatchObject({
      sandbox: 'bubblewrap',
      memory: 'cgroup',
      cpu: 'rlimit',
      permissionModel: true,
    });
    expect(result.confinement?.degraded).toBeUndefined();
    expect(result.confinement?.controls).toEqual(expect.arrayContaining(confinedControls));
  });

  it('cannot reach the network: a connection to the host loopback fails with EPERM and never arrives', async () => {
    const result = await host.runParser('exfiltrate', { port: trap.port });
    expect(result).toMatchObject({ ok: true, data: 'blocked: EPERM' });
    expect(result.confinement?.controls).toEqual(
      expect.arrayContaining([SandboxControl.networkNamespace, SandboxControl.seccompNoInet]),
    );
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(trap.connections).toBe(0);
  });

  it('cannot write a file: the write is refused and nothing lands on the host', async () => {
    const target = join(dir, 'dropped.txt');
    const result = await host.runParser('dropFile', { path: target });
    expect(result).toMatchObject({ ok: true, data: 'refused: ERR_ACCESS_DENIED' });
    expect(existsSync(target)).toBe(false);
    expect(result.confinement?.controls).toEqual(
      expect.arrayContaining([SandboxControl.filesystemView, SandboxControl.noFileWrites]),
    );
  });
});
