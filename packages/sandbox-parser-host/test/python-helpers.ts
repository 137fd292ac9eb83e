// Shared by the Python runner's tests: the fixture modules and the interpreter they run.
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { ParserHost, ParserHostOptions } from '../src/index.ts';
import { makeHost } from './helpers.ts';

/** Well-behaved parsers and the seed table's failures. */
export const pythonParsersPath = fileURLToPath(
  new URL('./fixtures/python/parsers.py', import.meta.url),
);

/** Hostile parsers. */
export const pythonAttacksPath = fileURLToPath(
  new URL('./fixtures/python/attacks.py', import.meta.url),
);

/**
 * The system interpreter where there is one: on a root host, `python3` on PATH may be a version
 * manager's build under /root (mode 0700), which the sandbox user (uid 65534) cannot read; CI
 * machines have only /usr/bin/python3.
 */
export const testPython = existsSync('/usr/bin/python3') ? '/usr/bin/python3' : 'python3';

/** A Python host over `module` (the parsers fixture by default), closed after the test. */
export function makePythonHost(options: Partial<ParserHostOptions> = {}): ParserHost {
  return makeHost({ module: pythonParsersPath, python: testPython, ...options });
}
