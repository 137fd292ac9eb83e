// SandboxEngineConfig.wasmModules: modules read once, compiled in every isolate, exposed as
// globals directly or through a trusted binding file.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SandboxValidationError } from '@coda/sandbox-core';
import { afterAll, describe, expect, it } from 'vitest';
import { SandboxEngine } from '../src/index.ts';
import { writeGrowWasm } from './fixtures/grow-wasm.ts';
import { expectResult } from './helpers.ts';

const dir = mkdtempSync(join(tmpdir(), 'sandbox-isolate-wasm-'));
const wasmPath = writeGrowWasm(dir);
const bindingPath = join(dir, 'binding.js');
writeFileSync(
  bindingPath,
  `const instance = new WebAssembly.Instance(wasmModule, {});
   return Object.freeze({ pages: () => instance.exports.memory.buffer.byteLength / 65536 });`,
);
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('wasmModules', () => {
  it('exposes instance exports, or what the binding file returns, and removes WebAssembly', async () => {
    const engine = new SandboxEngine({
      isolation: 'in-process',
      poolSize: 1,
      wasmModules: [
        { name: 'raw', wasmPath },
        { name: 'bound', wasmPath, jsBindingPath: bindingPath },
      ],
    });
    try {
      const event = await engine.run({
        code: 'return [raw.grow(2), bound.pages(), Object.keys(bound), typeof bound.grow, typeof WebAssembly]',
      });
      expect(expectResult(event).payload).toEqual([1, 1, ['pages'], 'undefined', 'undefined']);
      const fresh = await engine.run({ code: 'return raw.memory.buffer.byteLength / 65536' });
      expect(expectResult(fresh).payload).toBe(1);
      // An exported memory leads to no memory constructor: a helper's attack made 64 MiB
      // memories outside memoryMb through raw.memory.constructor.
      const made = await engine.run({
        code: `const M = raw.memory.constructor;
          return [M === Object, Object.getPrototypeOf(raw.memory).constructor === Object, 'buffer' in new M({ initial: 1024 })]`,
      });
      expect(expectResult(made).payload).toEqual([true, true, false]);
    } finally {
      await engine.dispose();
    }
  });

  it('refuses module names that are not identifiers, reserved, or repeated', () => {
    const make = (names: string[]) => () =>
      new SandboxEngine({
        isolation: 'in-process',
        wasmModules: names.map((name) => ({ name, wasmPath })),
      });
    expect(make(['not-an-identifier'])).toThrow(SandboxValidationError);
    expect(make(['dataProxy'])).toThrow(/reserved global/);
    expect(make(['twice', 'twice'])).toThrow(/names must be unique/);
  });

  it('refuses a module file that cannot be read, naming it', () => {
    let caught: unknown;
    try {
      new SandboxEngine({
        wasmModules: [{ name: 'missing', wasmPath: join(dir, 'missing.wasm') }],
      });
    } catch (error) {
      caught = error;
    }
    expect((caught as SandboxValidationError).issues).toEqual([
      {
        path: 'wasmModules.0.wasmPath',
        message: 'cannot be read (ENOENT)',
        received: join(dir, 'missing.wasm'),
      },
    ]);
  });

  it('ends executions with UNAVAILABLE when workers cannot start (a module file went away)', async () => {
    const vanishing = join(dir, 'vanishing.wasm');
    writeFileSync(vanishing, '');
    const engine = new SandboxEngine({
      workers: 1,
      wasmModules: [{ name: 'gone', wasmPath: vanishing }],
    });
    rmSync(vanishing);
    try {
      const event = await engine.run({ code: 'return 1' });
      expect(event.type === 'error' && event.code).toBe('UNAVAILABLE');
      expect(event.type === 'error' && event.message).toContain(
        'The sandbox worker could not start',
      );
    } finally {
      await engine.dispose();
    }
  });
});
