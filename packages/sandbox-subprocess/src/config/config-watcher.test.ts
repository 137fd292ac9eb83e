import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SandboxValidationError } from '@coda/sandbox-core';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createSandbox } from '../sandbox.ts';
import { loadSandboxConfig, loosenedFields } from './config-file.ts';
import type { ConfigAppliedEvent, ConfigInvalidEvent } from './config-watcher.ts';
import { watchSandboxConfig } from './config-watcher.ts';

let dir = '';
let file = '';
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'coda-config-'));
  file = join(dir, 'config.json');
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const write = (value: unknown): void =>
  writeFileSync(file, typeof value === 'string' ? value : JSON.stringify(value));

function recorder() {
  const lines: { level: string; message: string; fields?: unknown }[] = [];
  const at =
    (level: string) =>
    (fields: unknown, message?: string): void => {
      if (typeof fields === 'string') lines.push({ level, message: fields });
      else lines.push({ level, message: message ?? '', fields });
    };
  return {
    lines,
    logger: { debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') },
  };
}

function next<T>(
  emitter: { once(event: string, listener: (value: T) => void): unknown },
  event: string,
): Promise<T> {
  return new Promise((resolve) => emitter.once(event, resolve));
}

describe('config.json', () => {
  it('loads the sandbox key over the defaults and ignores other keys', () => {
    write({
      port: 8080,
      sandbox: { timeoutMs: 1234, allowNetwork: false, rlimits: { processes: 9 } },
    });
    const policy = loadSandboxConfig(file);
    expect(policy).toMatchObject({ timeoutMs: 1234, allowNetwork: false, maxMemoryMb: 512 });
    expect(policy.rlimits.processes).toBe(9);
  });

  it('refuses a bad file naming each field', () => {
    write({ sandbox: { timeoutMs: 'soon', maxMemoryMb: -5 } });
    expect(() => loadSandboxConfig(file)).toThrow(SandboxValidationError);
    try {
      loadSandboxConfig(file);
    } catch (error) {
      expect((error as SandboxValidationError).issues.map((issue) => issue.path)).toEqual([
        'sandbox.timeoutMs',
        'sandbox.maxMemoryMb',
      ]);
    }
    write('{ not json');
    expect(() => loadSandboxConfig(file)).toThrow(/not valid JSON/);
    write({ other: 1 });
    expect(() => loadSandboxConfig(file)).toThrow(/sandbox/);
    expect(() => loadSandboxConfig(join(dir, 'missing.json'))).toThrow(
      /cannot read the file \(ENOENT\)/,
    );
  });

  it('applies a changed file without restart, and keeps the last good policy on a bad one', async () => {
    write({ sandbox: { timeoutMs: 1000, allowNetwork: false } });
    const sandbox = createSandbox();
    const { lines, logger } = recorder();
    const watcher = watchSandboxConfig(file, sandbox, { logger, debounceMs: 30 });
    try {
      expect(sandbox.getPolicy()).toMatchObject({ timeoutMs: 1000, allowNetwork: false });

      const applied = next<ConfigAppliedEvent>(watcher, 'applied');
      write({ sandbox: { timeoutMs: 500, allowNetwork: false } });
      expect((await applied).loosened).toEqual([]);
      expect(sandbox.getPolicy().timeoutMs).toBe(500);

      const invalid = next<ConfigInvalidEvent>(watcher, 'invalid');
      write({ sandbox: { timeoutMs: -1, allowNetwork: true } });
      const { error } = await invalid;
      expect(error.issues.map((issue) => issue.path)).toEqual(['sandbox.timeoutMs']);
      expect(sandbox.getPolicy()).toMatchObject({ timeoutMs: 500, allowNetwork: false });
      expect(
        lines.some(
          (line) => line.level === 'error' && line.message.includes('keeping the last good policy'),
        ),
      ).toBe(true);

      const loosened = next<ConfigAppliedEvent>(watcher, 'applied');
      write({ sandbox: { timeoutMs: 500 } });
      expect((await loosened).loosened).toEqual(['allowNetwork']);
      expect(lines.at(-1)).toEqual({
        level: 'warn',
        message: '[Sandbox] config change loosens the sandbox policy: allowNetwork',
        fields: { path: file, loosened: ['allowNetwork'] },
      });
    } finally {
      watcher.close();
    }
  });

  it('logs a warning naming every field an edit of config.json loosens', async () => {
    write({
      port: 8080,
      sandbox: {
        allowNetwork: false,
        env: { LANG: 'C.UTF-8' },
        rlimits: { processes: 32 },
        hidePaths: ['/srv/secrets'],
        runAs: { uid: 1000, gid: 1000 },
      },
    });
    const sandbox = createSandbox();
    const { lines, logger } = recorder();
    const watcher = watchSandboxConfig(file, sandbox, { logger, debounceMs: 30 });
    try {
      const applied = next<ConfigAppliedEvent>(watcher, 'applied');
      // The way an operator edits it: read the file, change it, write it back.
      const config = JSON.parse(readFileSync(file, 'utf8'));
      config.sandbox.env.LD_PRELOAD = '/tmp/inject.so';
      config.sandbox.rlimits.processes = 4096;
      config.sandbox.hidePaths = [];
      config.sandbox.readOnlyPaths = ['/home'];
      config.sandbox.writablePaths = ['/var/cache/build'];
      config.sandbox.allowUnixSockets = ['/run/docker.sock'];
      config.sandbox.runAs = 'host';
      writeFileSync(file, JSON.stringify(config, null, 2));
      const loosened = [
        'env',
        'rlimits.processes',
        'hidePaths',
        'readOnlyPaths',
        'writablePaths',
        'allowUnixSockets',
        'runAs',
      ];
      expect((await applied).loosened).toEqual(loosened);
      expect(sandbox.getPolicy()).toMatchObject({ runAs: 'host', allowNetwork: false });
      expect(lines.filter((line) => line.level === 'warn')).toEqual([
        {
          level: 'warn',
          message: `[Sandbox] config change loosens the sandbox policy: ${loosened.join(', ')}`,
          fields: { path: file, loosened },
        },
      ]);
    } finally {
      watcher.close();
    }
  });

  it('refuses to start on an invalid file', () => {
    write({ sandbox: { enabled: 'yes' } });
    expect(() => watchSandboxConfig(file, createSandbox())).toThrow(SandboxValidationError);
  });

  it('names the fields a change loosens', () => {
    const before = loadSandboxConfigFrom({
      allowNetwork: false,
      allowFileWrites: false,
      timeoutMs: 100,
      strict: true,
    });
    const after = loadSandboxConfigFrom({ timeoutMs: 0, maxMemoryMb: 1024 });
    expect(loosenedFields(before, after)).toEqual([
      'strict',
      'timeoutMs',
      'maxMemoryMb',
      'allowNetwork',
      'allowFileWrites',
    ]);
    expect(loosenedFields(after, before)).toEqual([]);
  });
});

function loadSandboxConfigFrom(sandbox: object) {
  write({ sandbox });
  return loadSandboxConfig(file);
}
