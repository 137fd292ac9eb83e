import { describe, expect, it } from 'vitest';
import { SandboxValidationError } from '../errors/error-classes.ts';
import { defaultSandboxPolicy, resolveSandboxPolicy } from './sandbox-policy.ts';

describe('sandbox policy', () => {
  it('defaults to seed 004’s values', () => {
    expect(defaultSandboxPolicy).toEqual({
      enabled: true,
      timeoutMs: 30_000,
      maxMemoryMb: 512,
      allowNetwork: true,
      allowFileWrites: true,
    });
    expect(Object.isFrozen(defaultSandboxPolicy)).toBe(true);
  });

  it('merges a partial policy, with the optional fields', () => {
    expect(
      resolveSandboxPolicy({
        allowNetwork: false,
        restrictToDirectory: '/srv/work',
        allowedSyscalls: ['read', 'write'],
      }),
    ).toEqual({
      ...defaultSandboxPolicy,
      allowNetwork: false,
      restrictToDirectory: '/srv/work',
      allowedSyscalls: ['read', 'write'],
    });
  });

  it('accepts 0 as "no limit" for time and memory, as the seed documents', () => {
    expect(resolveSandboxPolicy({ timeoutMs: 0, maxMemoryMb: 0 })).toMatchObject({
      timeoutMs: 0,
      maxMemoryMb: 0,
    });
  });

  it('names every bad field and its value', () => {
    let caught: unknown;
    try {
      resolveSandboxPolicy({
        enabled: 'yes',
        maxMemoryMb: -512,
        restrictToDirectory: '',
        allowedSyscalls: ['read', 'Bad Name'],
        network: false,
      } as never);
    } catch (error) {
      caught = error;
    }
    expect(caught).toBeInstanceOf(SandboxValidationError);
    const error = caught as SandboxValidationError;
    expect(error.issues.map(({ path, received }) => ({ path, received }))).toEqual([
      { path: 'enabled', received: '"yes"' },
      { path: 'maxMemoryMb', received: '-512' },
      { path: 'restrictToDirectory', received: '""' },
      { path: 'allowedSyscalls.1', received: '"Bad Name"' },
      { path: 'network', received: 'false' },
    ]);
    expect(error.message).toMatch(/^Invalid sandbox policy: /);
  });

  it('takes allowEncryptedClientHello as a boolean only, naming the field otherwise', () => {
    const network = { allow: ['api.example.com'], allowEncryptedClientHello: true };
    expect(resolveSandboxPolicy({ network }).network).toEqual(network);
    let caught: unknown;
    try {
      resolveSandboxPolicy({
        network: { allow: ['api.example.com'], allowEncryptedClientHello: 'yes' },
      } as never);
    } catch (error) {
      caught = error;
    }
    expect(caught).toBeInstanceOf(SandboxValidationError);
    expect(
      (caught as SandboxValidationError).issues.map(({ path, received }) => ({ path, received })),
    ).toEqual([{ path: 'network.allowEncryptedClientHello', received: '"yes"' }]);
  });
});
