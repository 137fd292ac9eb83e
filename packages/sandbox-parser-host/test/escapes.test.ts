// Ways past Node's permission model that parsers once had, refused in every confinement mode:
// built-ins and APIs the model does not cover, SIGUSR1 and other signals to other processes,
// descriptors inherited from the host, and symlinks out of the readable directories. Each test
// runs with `confinement: 'none'` and with the default (`'auto'`).
import { type ChildProcess, spawn } from 'node:child_process';
import { EventEmitter, once } from 'node:events';
import {
  closeSync,
  copyFileSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  realpathSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { url as inspectorUrl } from 'node:inspector';
import { createServer } from 'node:net';
import { getPriority, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createParserHost, type ParserHostOptions } from '../src/index.ts';
import { makeHost, thrown } from './helpers.ts';

const escapesPath = fileURLToPath(new URL('./fixtures/escapes.mjs', import.meta.url));
const descriptorHost = fileURLToPath(new URL('./descriptor-host.ts', import.meta.url));

const restricted = (name: string): string =>
  `ERR_ACCESS_DENIED: Access to this API has been restricted: ${name} is not available to parsers`;
const unknownSqlite = 'ERR_UNKNOWN_BUILTIN_MODULE: No such built-in module: node:sqlite';
const denied = (flag: string): string =>
  `ERR_ACCESS_DENIED: Access to this API has been restricted. Use --allow-${flag} to manage permissions.`;

let base: string;
beforeEach(() => {
  base = realpathSync(mkdtempSync(join(tmpdir(), 'coda-parser-escape-')));
});
afterEach(() => rmSync(base, { recursive: true, force: true }));

function dirIn(...parts: string[]): string {
  const dir = join(base, ...parts);
  mkdirSync(dir, { recursive: true });
  return dir;
}

/** Process ids of runner children (node, not bwrap) of this process whose argv holds `url`. */
function runnerPids(url: string): number[] {
  const node = realpathSync(process.execPath);
  const descends = (pid: number): boolean => {
    for (let at = pid, hops = 0; at > 1 && hops < 16; hops++) {
      if (at === process.pid) return true;
      at = Number(readFileSync(`/proc/${at}/stat`, 'latin1').split(') ')[1]?.split(' ')[1]);
    }
    return false;
  };
  return readdirSync('/proc')
    .filter((name) => /^\d+$/.test(name))
    .map(Number)
    .filter((pid) => {
      try {
        const argv = readFileSync(`/proc/${pid}/cmdline`, 'latin1').split('\0');
        return argv.includes(url) && readlinkSync(`/proc/${pid}/exe`) === node && descends(pid);
      } catch {
        return false;
      }
    });
}

describe.each([
  { mode: 'none', options: { confinement: 'none' } },
  { mode: 'default', options: {} },
] as const)('confinement: $mode', ({ mode, options }) => {
  const host = (more: Partial<ParserHostOptions> = {}) =>
    makeHost({ module: escapesPath, ...options, ...more });

  it('node:sqlite is not there: no database outside allowRead is read, none is created', async () => {
    const db = join(base, 'host.db');
    const { DatabaseSync } = process.getBuiltinModule('node:sqlite');
    const hostDb = new DatabaseSync(db);
    hostDb.exec("create table t (x); insert into t values ('host secret')");
    hostDb.close();
    const dir = dirIn('writable');
    const result = await host().runParser('useSqlite', { db, dir });
    expect(result).toMatchObject({ ok: true });
    expect(result.data).toEqual({
      import: unknownSqlite,
      create: unknownSqlite,
      require: unknownSqlite,
      getBuiltinModule: 'ok: "undefined"',
      isBuiltin: 'ok: false',
    });
    expect(readdirSync(dir)).toEqual([]);
  });

  it('V8 flags at run time, and every other API on the list, are refused and write nothing', async () => {
    const dir = dirIn('writable');
    const secretFile = join(base, 'secret.env');
    writeFileSync(secretFile, 'TOKEN=host-secret\n');
    const result = await host().runParser('bypassPermissions', { dir, secretFile });
    expect(result).toMatchObject({ ok: true });
    expect(result.data).toEqual({
      setFlagsFromString: restricted('v8.setFlagsFromString'),
      setFlagsFromStringRequired: restricted('v8.setFlagsFromString'),
      setFlagsFromStringBuiltin: restricted('v8.setFlagsFromString'),
      nativesSyntax: "SyntaxError: Unexpected token '%'",
      hotLoop: 'ok: true',
      // 0 is module.constants.compileCacheStatus.FAILED: no write permission.
      enableCompileCache: 'ok: 0',
      writeReport: 'ERR_ACCESS_DENIED: Access to this API has been restricted',
      writeHeapSnapshot: denied('fs-write'),
      setHeapSnapshotNearHeapLimit: denied('fs-write'),
      createTracing: denied('fs-write'),
      loadEnvFile: denied('fs-read'),
      parseEnv: 'ok: {"A":"1"}',
      wasi: denied('wasi'),
      inspectorSession: denied('inspector'),
      inspectorOpen: denied('inspector'),
      binding: 'ERR_ACCESS_DENIED: process.binding',
      linkedBinding: denied('addons'),
      dlopen: 'ERR_DLOPEN_DISABLED: Cannot load native addon because loading addons is disabled.',
      worker: denied('worker'),
      childProcess: denied('child-process'),
      execve: denied('child-process'),
    });
    // No turbo-*.json trace, report, snapshot, cache or trace log anywhere the parser named.
    expect(readdirSync(dir)).toEqual([]);
  });

  it('unix-domain sockets: none is created, none outside is reached', async () => {
    const dir = dirIn('writable');
    const socket = join(base, 'host.sock');
    let connections = 0;
    const server = createServer((connection) => {
      connections += 1;
      connection.end();
    });
    await new Promise<void>((resolve) => server.listen(socket, resolve));
    try {
      const result = await host().runParser('useUnixSockets', { dir, socket });
      expect(result.data).toEqual({
        listen: `EACCES: listen EACCES: permission denied ${dir}/parser.sock`,
        listenAbstract: 'EACCES: listen EACCES: permission denied \0coda-parser',
        connect: `EACCES: connect EACCES ${socket} - Local (undefined:undefined)`,
        httpSocketPath: `EACCES: connect EACCES ${socket} - Local (undefined:undefined)`,
      });
      expect(readdirSync(dir)).toEqual([]);
      expect(connections).toBe(0);
    } finally {
      server.close();
    }
  });

  describe('signals', () => {
    let target: ChildProcess | undefined;
    afterEach(() => {
      target?.kill('SIGKILL');
      target = undefined;
    });

    it('no signal or priority change reaches a host-like process by pid, nor the parent', async () => {
      // The target records every signal it gets; SIGUSR1 would also open its inspector.
      const recorder = `for (const name of ['SIGUSR1', 'SIGUSR2', 'SIGHUP'])
        process.on(name, () => process.stdout.write(name + '\\n'));
      process.stdout.write('ready\\n');
      setInterval(() => {}, 60_000);`;
      const started = spawn(process.execPath, ['-e', recorder], {
        stdio: ['ignore', 'pipe', 'ignore'],
        detached: true,
      });
      target = started;
      let seen = '';
      const arrived = new EventEmitter();
      started.stdout?.on('data', (chunk: Buffer) => {
        seen += chunk.toString();
        arrived.emit('line');
      });
      const waitFor = async (line: string) => {
        while (!seen.split('\n').includes(line)) await once(arrived, 'line');
      };
      await waitFor('ready');
      const pid = started.pid as number;
      const niceBefore = getPriority(pid);
      const parentSignals: string[] = [];
      const onParentSignal = () => parentSignals.push('SIGUSR2');
      process.on('SIGUSR2', onParentSignal);
      try {
        const result = await host().runParser('signalProcesses', { pid });
        expect(result.data).toEqual({
          kill: restricted('process.kill'),
          killProbe: restricted('process.kill'),
          killParent: restricted('process.kill'),
          killGroup: restricted('process.kill'),
          rawKill: restricted('process._kill'),
          debugProcess: restricted('process._debugProcess'),
          debugParent: restricted('process._debugProcess'),
          setPriority: restricted('os.setPriority'),
          setPriorityRequired: restricted('os.setPriority'),
          setPriorityBuiltin: restricted('os.setPriority'),
          redefine: 'TypeError: Cannot redefine property: kill',
        });
        // A signal the test sends itself arrives, and it is the only one the target saw.
        process.kill(pid, 'SIGHUP');
        await waitFor('SIGHUP');
        expect(seen).toBe('ready\nSIGHUP\n');
        expect(getPriority(pid)).toBe(niceBefore);
        expect(parentSignals).toEqual([]);
        expect(inspectorUrl()).toBeUndefined();
      } finally {
        process.off('SIGUSR2', onParentSignal);
      }
    });

    it('SIGUSR1 sent to a runner child opens no inspector: it runs with --disable-sigusr1', async () => {
      expect(process.allowedNodeEnvironmentFlags.has('--disable-sigusr1')).toBe(true);
      const spareHost = host({ warmSpare: true });
      await spareHost.warm();
      const url = pathToFileURL(escapesPath).href;
      const pids = runnerPids(url);
      expect(pids).toHaveLength(1);
      const pid = pids[0] as number;
      expect(readFileSync(`/proc/${pid}/cmdline`, 'latin1').split('\0')).toContain(
        '--disable-sigusr1',
      );
      process.kill(pid, 'SIGUSR1');
      await new Promise((resolve) => setTimeout(resolve, 100));
      // The spare is still there and takes the call.
      expect(runnerPids(url)).toEqual([pid]);
      const result = await spareHost.runParser('readPath', { path: escapesPath });
      expect(result).toMatchObject({ ok: true, exitCode: 0 });
      expect(result.stderr).not.toMatch(/Debugger listening/);
      expect(runnerPids(url)).toEqual([]);
    });
  });

  it('descriptors the host inherited are closed before the parser loads', async () => {
    const secretFile = join(base, 'inherited.txt');
    writeFileSync(secretFile, 'inherited secret');
    const fd = openSync(secretFile, 'r');
    try {
      const stdio: ('ignore' | 'pipe' | number)[] = Array.from({ length: 201 }, () => 'ignore');
      stdio[1] = 'pipe';
      stdio[2] = 'pipe';
      stdio[30] = fd;
      stdio[200] = fd;
      const child = spawn(process.execPath, ['--conditions=@coda/source', descriptorHost, mode], {
        stdio,
        env: process.env,
      });
      let stdout = '';
      let stderr = '';
      child.stdout?.on('data', (chunk: Buffer) => {
        stdout += chunk.toString();
      });
      child.stderr?.on('data', (chunk: Buffer) => {
        stderr += chunk.toString();
      });
      const [exitCode] = await once(child, 'exit');
      expect({ exitCode, stderr }).toEqual({ exitCode: 0, stderr: '' });
      const { inherited, result } = JSON.parse(stdout);
      // The host holds both without close-on-exec, so its children inherit them ...
      const held = { text: 'inherited secret', closeOnExec: false };
      expect(inherited).toEqual({ 30: held, 200: held });
      // ... and the parser finds no file open above fd 3.
      expect(result).toMatchObject({ ok: true });
      expect(result.data).toEqual({});
    } finally {
      closeSync(fd);
    }
  });

  describe('symlinks', () => {
    const create = (more: Partial<ParserHostOptions>) => () =>
      createParserHost({ module: escapesPath, warmSpare: false, ...options, ...more });

    /** A module directory holding a copy of the fixture module. */
    function moduleDir(name: string): { dir: string; module: string } {
      const dir = dirIn(name);
      const module = join(dir, 'parsers.mjs');
      copyFileSync(escapesPath, module);
      return { dir, module };
    }

    it('a module directory with a link to a secrets directory or to /etc is refused', () => {
      const secrets = dirIn('secrets');
      writeFileSync(join(secrets, 'token.txt'), 'host secret');
      const one = moduleDir('one');
      symlinkSync(secrets, join(one.dir, 'secrets'));
      const two = moduleDir('two');
      symlinkSync('/etc', join(two.dir, 'etc'));
      for (const [{ dir, module }, target] of [
        [one, secrets],
        [two, '/etc'],
      ] as const) {
        const name = target === '/etc' ? 'etc' : 'secrets';
        const error = thrown(create({ module }));
        expect(error.code).toBe('VALIDATION');
        expect(error.issues).toEqual([
          {
            path: 'module',
            message: `${dir}/${name} is a symlink to ${target}, outside the readable paths`,
            received: JSON.stringify(module),
          },
        ]);
      }
    });

    it('a link up the tree, where link/.. would climb out, is refused', () => {
      const { dir, module } = moduleDir('mods');
      mkdirSync(join(dir, 'sub'));
      symlinkSync('..', join(dir, 'sub', 'up'));
      const error = thrown(create({ module }));
      expect(error.issues).toEqual([
        {
          path: 'module',
          message: `${dir}/sub/up is a symlink to ${dir}, a directory above the link's own level (a path through it and .. would lead out of the readable paths)`,
          received: JSON.stringify(module),
        },
      ]);
    });

    it('a module that is a link to a file outside its directory is refused', () => {
      const elsewhere = moduleDir('elsewhere');
      const dir = dirIn('mods');
      const module = join(dir, 'parsers.mjs');
      symlinkSync(elsewhere.module, module);
      const error = thrown(create({ module }));
      expect(error.code).toBe('VALIDATION');
      expect(error.issues).toEqual([
        {
          path: 'module',
          message: `${module} is a symlink to ${elsewhere.module}, outside its directory ${dir}`,
          received: JSON.stringify(module),
        },
      ]);
    });

    it('an allowRead path through a link out of its directory, or holding one, is refused', () => {
      const secrets = dirIn('secrets');
      writeFileSync(join(secrets, 'token.txt'), 'host secret');
      const data = dirIn('data');
      symlinkSync(secrets, join(data, 'current'));
      const other = dirIn('other');
      symlinkSync('/etc', join(other, 'etc'));
      const through = join(data, 'current', 'token.txt');
      const error = thrown(create({ allowRead: [base, through, other] }));
      expect(error.code).toBe('VALIDATION');
      expect(error.message).toMatch(/^Invalid parser host options: allowRead\.1: /);
      expect(error.issues).toEqual([
        {
          path: 'allowRead.1',
          message: `${data}/current is a symlink to ${secrets}, outside ${data}, the directory that holds it`,
          received: JSON.stringify(through),
        },
      ]);
      // Once that path is fixed, the directory holding a link to /etc is the problem.
      const second = thrown(create({ allowRead: [other] }));
      expect(second.issues).toEqual([
        {
          path: 'allowRead.0',
          message: `${other}/etc is a symlink to /etc, outside the readable paths`,
          received: JSON.stringify(other),
        },
      ]);
    });

    it('links that stay inside are accepted, and the child may read only real paths', async () => {
      const real = moduleDir('real');
      const linkedDir = join(base, 'linked');
      symlinkSync(real.dir, linkedDir);
      const data = dirIn('data');
      const v2 = dirIn('data', 'v2');
      writeFileSync(join(v2, 'file.txt'), 'allowed');
      symlinkSync('v2', join(data, 'current'));
      const secrets = dirIn('secrets');
      writeFileSync(join(secrets, 'token.txt'), 'host secret');
      const linkedHost = makeHost({
        module: join(linkedDir, 'parsers.mjs'),
        allowRead: [join(data, 'current')],
        ...options,
      });
      const read = (path: string) => linkedHost.runParser('readPath', { path });
      const [viaReal, viaLink, secret] = await Promise.all([
        read(join(v2, 'file.txt')),
        read(join(data, 'current', 'file.txt')),
        read(join(secrets, 'token.txt')),
      ]);
      expect(viaReal).toMatchObject({ ok: true, data: 'ok: "allowed"' });
      // Only the real location was allowed; the link's own path is not.
      expect(viaLink).toMatchObject({ ok: true, data: denied('fs-read') });
      expect(secret).toMatchObject({ ok: true, data: denied('fs-read') });
    });
  });
});
