// What a parser (or a payload that took over one) can reach: no writes, no processes, no
// workers, no reads outside its module's directory, no host environment, no state between calls.
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import { createParserHost } from '../src/index.ts';
import { makeHost } from './helpers.ts';

describe('least privilege', () => {
  it('cannot write a file, spawn a process, start a worker or read outside its directory', async () => {
    const host = makeHost({ maxConcurrent: 2 });
    const [write, spawn, worker, read] = await Promise.all([
      host.runParser('writeFile', null),
      host.runParser('spawnProcess', null),
      host.runParser('startWorker', null),
      host.runParser('readFile', null),
    ]);
    expect(write).toMatchObject({ ok: false, code: 'RUNTIME', exitCode: 1 });
    expect(write.error).toMatch(/Access to this API has been restricted.*--allow-fs-write/);
    expect(existsSync('/tmp/coda-parser-host-escape.txt')).toBe(false);
    expect(spawn.error).toMatch(/Access to this API has been restricted.*--allow-child-process/);
    expect(worker.error).toMatch(/Access to this API has been restricted.*--allow-worker/);
    expect(read.error).toMatch(/Access to this API has been restricted.*--allow-fs-read/);
  });

  it('refuses, naming the directory, a module the unprivileged child could not read', async () => {
    const dir = mkdtempSync('/var/tmp/coda-parser-0700-'); // mode 0700, owned by the root host
    onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
    writeFileSync(join(dir, 'parsers.mjs'), 'export function echo(payload) { return payload; }\n');
    await using host = createParserHost({ module: join(dir, 'parsers.mjs') });
    const result = await host.runParser('echo', { a: 1 });
    expect(result).toMatchObject({ ok: false, code: 'VALIDATION', exitCode: null });
    // readOnlyPaths: node, the runner, wire.js, json-cost.js, then the module's directory (4).
    expect(result.ok === false && result.error).toBe(
      `cannot start a parser child: Invalid spawn options: readOnlyPaths.4: not readable by the sandbox identity 65534:65534 (make it readable by others, or set runAs) (got ${JSON.stringify(dir)})`,
    );
  });

  it('sees no host variable and an empty private working directory', async () => {
    process.env.CODA_PARSER_HOST_SECRET = 'do-not-leak';
    const host = makeHost();
    const result = await host.runParser('readEnv', null);
    expect(result.ok).toBe(true);
    const data = result.data as { keys: string[]; cwd: string };
    // Only what the sandbox itself sets: the private HOME (also the cwd), PWD, and SHLVL from
    // the bash that restores the (empty) environment after the identity drop.
    expect(data.keys.sort()).toEqual(['HOME', 'PWD', 'SHLVL']);
    expect(data.cwd).toBe('/home/sandbox');
    expect(result.confinement?.controls).toContain('identity:unprivileged');
  });

  it('cannot open a network connection when confined; says so when it is not', async () => {
    const server = createServer((socket) => socket.end());
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as { port: number };
    try {
      const host = makeHost();
      const result = await host.runParser('connect', { port });
      if (result.confinement?.sandbox === 'bubblewrap') {
        expect(result).toMatchObject({ ok: false, code: 'RUNTIME' });
      } else {
        // Node 24's permission model has no network permission: only the network namespace
        // closes this, and an unconfined result must say that it is degraded.
        expect(result.confinement?.degraded).toEqual(expect.any(String));
      }
    } finally {
      server.close();
    }
  });

  it('a __proto__ payload stays data: no prototype is polluted on either side', async () => {
    const host = makeHost();
    const payload = JSON.parse('{"__proto__":{"polluted":"yes"},"a":1}') as object;
    const result = await host.runParser('pollute', payload);
    expect(result).toMatchObject({ ok: true, data: { polluted: null, ownProto: true } });
    const echoed = await host.runParser('echo', payload);
    const data = (echoed.data as { payload: object }).payload;
    expect(Object.hasOwn(data, '__proto__')).toBe(true);
    expect(Object.getPrototypeOf(data)).toBe(Object.prototype);
    expect(({} as { polluted?: unknown }).polluted).toBeUndefined();
  });

  it('nothing survives between calls', async () => {
    const host = makeHost({ warmSpare: true });
    const first = await host.runParser('counter', null);
    const second = await host.runParser('counter', null);
    expect(first.data).toEqual({ calls: 1, seen: 1 });
    expect(second.data).toEqual({ calls: 1, seen: 1 });
  });
});
