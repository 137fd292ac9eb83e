// Which runner a host's children run, from the options and the module's name, and for Python
// the interpreter (found once, when the host is created).
import { SandboxValidationError } from '@coda/sandbox-core';
import { findPythonInterpreter, type PythonInterpreter } from '../spawn/python-interpreter.ts';
import type { ParserRuntime } from './options.ts';

/** The runtime and, for `python`, its interpreter. */
export interface RuntimeChoice {
  runtime: ParserRuntime;
  python?: PythonInterpreter;
}

/**
 * `runtime` as given, else `python` for a `.py` module and `node` otherwise; throws a
 * `SandboxValidationError` naming `python` when it is given for a Node module or cannot be used.
 */
export function chooseRuntime(
  modulePath: string,
  options: { runtime?: ParserRuntime | undefined; python?: string | undefined },
): RuntimeChoice {
  const runtime = options.runtime ?? (modulePath.endsWith('.py') ? 'python' : 'node');
  if (runtime === 'node') {
    if (options.python !== undefined) {
      const message = 'only a python runtime has an interpreter to choose';
      throw new SandboxValidationError(`Invalid parser host options: python: ${message}`, {
        issues: [{ path: 'python', message, received: JSON.stringify(options.python) }],
      });
    }
    return { runtime };
  }
  return { runtime, python: findPythonInterpreter(options.python) };
}
