// Shared by the tests: the fixture module and a host factory that closes what it made.
import { fileURLToPath } from 'node:url';
import { isSandboxError, type SandboxValidationError } from '@coda/sandbox-core';
import { afterEach } from 'vitest';
import { createParserHost, type ParserHost, type ParserHostOptions } from '../src/index.ts';

/** The fixture module of parser functions. */
export const parsersPath = fileURLToPath(new URL('./fixtures/parsers.mjs', import.meta.url));

const open = new Set<ParserHost>();

afterEach(async () => {
  await Promise.all([...open].map((host) => host.close()));
  open.clear();
});

/** A host over the fixture module, closed after the test. */
export function makeHost(options: Partial<ParserHostOptions> = {}): ParserHost {
  const host = createParserHost({ module: parsersPath, warmSpare: false, ...options });
  open.add(host);
  return host;
}

/** The SandboxError `run` throws (the tests' validation errors); fails when it does not throw. */
export function thrown(run: () => unknown): SandboxValidationError {
  try {
    run();
  } catch (error) {
    if (isSandboxError(error)) return error as SandboxValidationError;
    throw error;
  }
  throw new Error('expected a throw');
}
