// Where the runner and the one module it imports live. Installed, that is `dist/*.js`. Inside
// the repository the host runs from `src/` (the `@coda/source` condition); there the built
// runner is used when it is at least as new as its sources, because Node strips the types of
// a `.ts` runner on every child start, which costs each cold child tens of milliseconds.
import { statSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const files = [
  'runner/runner',
  'protocol/wire',
  'protocol/json-cost',
  'runner/isolate-runner',
] as const;

function modifiedAt(url: URL): number {
  try {
    return statSync(url).mtimeMs;
  } catch {
    return Number.NaN;
  }
}

function chooseFiles(): string[] {
  if (!import.meta.url.endsWith('.ts')) {
    return files.map((file) => fileURLToPath(new URL(`../${file}.js`, import.meta.url)));
  }
  const sources = files.map((file) => new URL(`../${file}.ts`, import.meta.url));
  const built = files.map((file) => new URL(`../../dist/${file}.js`, import.meta.url));
  const newestSource = Math.max(...sources.map(modifiedAt));
  // NaN (a missing file) fails the comparison, so a missing build falls back to the sources.
  const fresh = built.every((url) => modifiedAt(url) >= newestSource);
  return (fresh ? built : sources).map((url) => fileURLToPath(url));
}

const [runner, wire, jsonCost, isolateRunner] = chooseFiles() as [string, string, string, string];

/** Absolute path of the runner script the child executes. */
export const runnerPath = runner;

/** Absolute path of the protocol constants the runner imports. */
export const wirePath = wire;

/** Absolute path of the result-cost estimate the runner imports. */
export const jsonCostPath = jsonCost;

/** Absolute path of the isolate child's program (`processModel: 'isolate'`). */
export const isolateRunnerPath = isolateRunner;

/**
 * Absolute path of the Python runner. It is not compiled: installed, it is read from the
 * package's `src/runner/` (published with `dist/`); in the repository, from next to this file.
 */
export const pythonRunnerPath = fileURLToPath(
  new URL(
    import.meta.url.endsWith('.ts') ? '../runner/runner.py' : '../../src/runner/runner.py',
    import.meta.url,
  ),
);
