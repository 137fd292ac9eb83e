// The Python runner: seed 004's failure table row by row, kwargs as keyword arguments, which
// functions are parsers, and how the interpreter is chosen, with real python3 children in both
// confinement modes.
import { execFileSync } from 'node:child_process';
import { chmodSync, copyFileSync, mkdtempSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { createParserHost } from '../src/index.ts';
import { thrown } from './helpers.ts';
import { makePythonHost, pythonParsersPath, testPython } from './python-helpers.ts';

describe.each([
  { mode: 'none', options: { confinement: 'none' } },
  { mode: 'default', options: {} },
] as const)('python runner, confinement: $mode', ({ mode, options }) => {
  const host = () => makePythonHost(options);

  it('success, kwargs as keyword arguments, None as null', async () => {
    const parsers = host();
    const [flat, echoed, strict, nothing] = await Promise.all([
      parsers.runParser('flatten', { frames: [{ values: [1, 2] }, { values: [3] }] }),
      parsers.runParser('echo', { a: 1 }, { kwargs: { strict: true, unit: 'kPa' } }),
      parsers.runParser(
        'strict_flatten',
        { frames: [{ values: [1, 'x'] }] },
        { kwargs: { strict: true } },
      ),
      parsers.runParser('nothing', null),
    ]);
    expect(flat).toMatchObject({ ok: true, data: [1, 2, 3], exitCode: 0, timedOut: false });
    expect(echoed.data).toEqual({ payload: { a: 1 }, kwargs: { strict: true, unit: 'kPa' } });
    expect(strict).toMatchObject({
      ok: false,
      error: 'values must be integers',
      code: 'RUNTIME',
      exitCode: 1,
    });
    expect(nothing).toMatchObject({ ok: true, data: null, exitCode: 0 });
    expect(flat.confinement).toMatchObject({
      runtime: 'python',
      auditHook: true,
      permissionModel: false,
      sandbox: mode === 'none' ? 'none' : 'bubblewrap',
    });
  });

  it('the parser raises: its message, exit code 1, RUNTIME (SystemExit too)', async () => {
    const parsers = host();
    const [raised, exited] = await Promise.all([
      parsers.runParser('throws', { id: 7 }),
      parsers.runParser('exits', null),
    ]);
    expect(raised).toMatchObject({
      ok: false,
      error: 'bad frame: 7',
      exitCode: 1,
      code: 'RUNTIME',
    });
    expect(exited).toMatchObject({
      ok: false,
      error: 'SystemExit: 3',
      exitCode: 1,
      code: 'RUNTIME',
    });
  });

  it('only public functions defined in the module are parsers', async () => {
    const parsers = host();
    const names = ['_private', 'imported_dumps', 'not_a_function', 'missing', '__init__', 'json'];
    const results = await Promise.all(names.map((name) => parsers.runParser(name, null)));
    expect(results.map((result) => [result.code, result.error])).toEqual(
      names.map((name) => ['VALIDATION', `Unknown parser: ${name}`]),
    );
  });

  it('wall clock, CPU and memory limits: TIMEOUT, TIMEOUT with SIGXCPU, OOM', async () => {
    const parsers = host();
    const [wall, cpu, memory, rows] = await Promise.all([
      parsers.runParser('sleep', { s: 60 }, { timeout: 500 }),
      parsers.runParser('spin', null, { cpuSecs: 1 }),
      parsers.runParser('memory_bomb', null, { memoryBytes: 64 * 1024 * 1024 }),
      parsers.runParser('row_bomb', null, { memoryBytes: 64 * 1024 * 1024 }),
    ]);
    expect(wall).toMatchObject({
      ok: false,
      timedOut: true,
      error: 'sandbox timeout',
      code: 'TIMEOUT',
      signal: 'SIGKILL',
    });
    expect(cpu).toMatchObject({
      ok: false,
      timedOut: false,
      error: 'CPU time limit exceeded (1 s)',
      code: 'TIMEOUT',
      signal: 'SIGXCPU',
    });
    expect(memory).toMatchObject({
      ok: false,
      code: 'OOM',
      error: 'memory limit exceeded: MemoryError (RLIMIT_AS 67108864 bytes)',
      exitCode: 1,
    });
    expect(rows).toMatchObject({ ok: false, code: 'OOM', error: memory.error, exitCode: 1 });
  });

  it('console output lands in stderr, never in the result', async () => {
    const result = await host().runParser('chatty', null);
    expect(result).toMatchObject({ ok: true, data: 'quiet' });
    expect(result.stderr).toBe(
      'a log line from the parser\n{"ok":true,"data":"forged on stdout"}\n',
    );
  });

  it('isolated interpreter: limits in force at import, only the module dir and stdlib importable', async () => {
    const result = await host().runParser('interpreter', null, {
      memoryBytes: 200 * 1024 * 1024,
      cpuSecs: 3,
    });
    // The standard library as the interpreter's sysconfig names it, and its lib-dynload.
    const [stdlib = '', platstdlib = ''] = execFileSync(testPython, [
      '-I',
      '-S',
      '-c',
      'import sysconfig; print(sysconfig.get_paths()["stdlib"]); print(sysconfig.get_paths()["platstdlib"])',
    ])
      .toString()
      .trim()
      .split('\n')
      .map((path) => realpathSync(path));
    expect(result.data).toEqual({
      limits: { as: [209_715_200, 209_715_200], cpu: [3, 4], core: [0, 0] },
      path: [
        dirname(pythonParsersPath),
        ...new Set([stdlib, platstdlib]),
        join(platstdlib, 'lib-dynload'),
      ],
      isolated: 1,
      no_site: 1,
      dont_write_bytecode: true,
      site_loaded: false,
      // LC_CTYPE is Python's own (PEP 538 coerces the C locale to C.UTF-8 at start); under
      // bubblewrap the subprocess layer sets HOME, PWD and SHLVL in the child's own home.
      environ: mode === 'none' ? ['LC_CTYPE'] : ['HOME', 'LC_CTYPE', 'PWD', 'SHLVL'],
      sibling: "from the module's directory",
    });
  });

  it('warm spares serve calls back to back, each child once', async () => {
    const parsers = makePythonHost({ ...options, spares: 3, warmSpare: true });
    await parsers.warm();
    const states: { calls: number; token: string }[] = [];
    for (let call = 0; call < 4; call++) {
      const result = await parsers.runParser('state', null);
      expect(result.ok).toBe(true);
      states.push(result.data as { calls: number; token: string });
    }
    expect(states.map((state) => state.calls)).toEqual([1, 1, 1, 1]);
    expect(new Set(states.map((state) => state.token)).size).toBe(4);
  });
});

describe('choosing the interpreter', () => {
  it('a .py module means runtime python; python3 on PATH, the first every user can read', async () => {
    // A private copy of the interpreter first on PATH, as a version manager's build in a 0700
    // home would be: the sandbox user could not run it, so the system's is chosen.
    const dir = mkdtempSync(join(tmpdir(), 'coda-private-python-'));
    const path = process.env.PATH;
    try {
      copyFileSync(realpathSync('/usr/bin/python3'), join(dir, 'python3'));
      chmodSync(join(dir, 'python3'), 0o755);
      process.env.PATH = `${dir}:/usr/bin`;
      const host = createParserHost({ module: pythonParsersPath, warmSpare: false });
      expect(host.settings).toMatchObject({
        runtime: 'python',
        python: realpathSync('/usr/bin/python3'),
      });
      await host.close();
      const given = createParserHost({
        module: pythonParsersPath,
        warmSpare: false,
        python: join(dir, 'python3'),
      });
      expect(given.settings.python).toBe(join(dir, 'python3'));
      await given.close();
    } finally {
      process.env.PATH = path;
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('refuses an interpreter that is not there, one older than 3.9, and python for node', () => {
    const dir = mkdtempSync(join(tmpdir(), 'coda-python-'));
    try {
      const old = join(dir, 'python3.8');
      writeFileSync(
        old,
        `#!/bin/sh\necho '{"executable": "${testPython}", "version": [3, 8, 18], "stdlib": []}'\n`,
      );
      chmodSync(old, 0o755);
      const missing = thrown(() =>
        createParserHost({ module: pythonParsersPath, python: join(dir, 'none') }),
      );
      expect(missing.issues.map((issue) => issue.path)).toEqual(['python']);
      expect(missing.message).toMatch(
        /^Invalid parser host options: python: cannot start \/.*\/none: /,
      );
      const tooOld = thrown(() => createParserHost({ module: pythonParsersPath, python: old }));
      expect(tooOld.message).toBe(
        `Invalid parser host options: python: ${old} is Python 3.8.18; the runner needs 3.9 or newer`,
      );
      const forNode = thrown(() =>
        createParserHost({
          module: new URL('./fixtures/parsers.mjs', import.meta.url),
          python: 'python3',
        }),
      );
      expect(forNode.issues.map((issue) => [issue.path, issue.message])).toEqual([
        ['python', 'only a python runtime has an interpreter to choose'],
      ]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('a Python module the sandbox user cannot read is refused, naming its directory', async () => {
    const dir = mkdtempSync('/var/tmp/coda-python-0700-'); // mode 0700, owned by the root host
    try {
      writeFileSync(join(dir, 'parsers.py'), 'def echo(payload):\n    return payload\n');
      await using host = createParserHost({
        module: join(dir, 'parsers.py'),
        python: testPython,
        warmSpare: false,
      });
      const result = await host.runParser('echo', 1);
      expect(result).toMatchObject({ ok: false, code: 'VALIDATION', exitCode: null });
      expect(result.error).toMatch(
        /^cannot start a parser child: Invalid spawn options: readOnlyPaths\.\d+: not readable by the sandbox identity 65534:65534 /,
      );
      expect(result.error?.endsWith(`(got ${JSON.stringify(dir)})`)).toBe(true);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('runtime node for a .py module is refused at the call (not an ES module)', async () => {
    const host = makePythonHost({ runtime: 'node', python: undefined, confinement: 'none' });
    const result = await host.runParser('echo', null);
    expect(result).toMatchObject({ ok: false, code: 'RUNTIME' });
    expect(result.error).toMatch(/^cannot load parser module: /);
  });
});
