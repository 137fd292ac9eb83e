// Options are validated at the boundary: the host throws one SandboxValidationError naming each
// bad field; a call with bad options resolves to a VALIDATION result and never rejects.
import { mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { createParserHost } from '../src/index.ts';
import { makeHost, parsersPath, thrown } from './helpers.ts';

describe('options', () => {
  it('names every bad host option', () => {
    const error = thrown(() =>
      createParserHost({
        module: parsersPath,
        maxConcurrent: 0,
        limits: { timeout: -1 },
        // @ts-expect-error an unknown option
        colour: 'red',
      }),
    );
    expect(error.code).toBe('VALIDATION');
    expect(error.issues.map((issue) => issue.path).sort()).toEqual([
      'colour',
      'limits.timeout',
      'maxConcurrent',
    ]);
  });

  it('refuses a module that does not exist', () => {
    const error = thrown(() => createParserHost({ module: '/nonexistent/parsers.mjs' }));
    expect(error.message).toBe(
      'Invalid parser host options: module: no such file /nonexistent/parsers.mjs',
    );
  });

  it('accepts a file URL and a relative path', async () => {
    const host = makeHost({ module: new URL('./fixtures/parsers.mjs', import.meta.url) });
    expect((await host.runParser('echo', 1)).ok).toBe(true);
  });

  it('a module in a symlinked directory is read at its real path', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'coda-parser-link-'));
    try {
      symlinkSync(dirname(parsersPath), join(dir, 'linked'));
      const host = makeHost({ module: join(dir, 'linked', 'parsers.mjs') });
      expect(await host.runParser('echo', 1)).toMatchObject({ ok: true });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('a call with bad options or a bad name is a VALIDATION result, not a rejection', async () => {
    const host = makeHost();
    const bad = await host.runParser('echo', 1, { timeout: 0, cpuSecs: 1.5 });
    expect(bad).toMatchObject({ ok: false, code: 'VALIDATION', exitCode: null });
    expect(bad.error).toMatch(/timeout: .*\(got 0\)/);
    expect(bad.error).toMatch(/cpuSecs: .*\(got 1\.5\)/);
    // @ts-expect-error a name that is not a string
    const notString = await host.runParser(42, 1);
    expect(notString).toMatchObject({ ok: false, code: 'VALIDATION' });
    const long = await host.runParser('p'.repeat(1025), 1);
    expect(long).toMatchObject({
      ok: false,
      code: 'VALIDATION',
      error: 'Invalid parser name: expected a string of 1 to 1024 characters',
    });
  });

  it('reports the settings after defaults', () => {
    const host = makeHost({ limits: { timeout: 2_000 } });
    expect(host.settings.limits).toEqual({ timeout: 2_000, memoryBytes: 268_435_456, cpuSecs: 5 });
    expect(host.settings.maxConcurrent).toBeGreaterThan(0);
  });
});
