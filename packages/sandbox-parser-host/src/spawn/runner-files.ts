// Where the runner and the one module it imports live: `src/*.ts` inside the repository (the
// `@coda/source` condition, run by Node's type stripping) and `dist/*.js` when installed.
import { fileURLToPath } from 'node:url';

const extension = import.meta.url.endsWith('.ts') ? '.ts' : '.js';

/** Absolute path of the runner script the child executes. */
export const runnerPath = fileURLToPath(new URL(`../runner/runner${extension}`, import.meta.url));

/** Absolute path of the protocol constants the runner imports. */
export const wirePath = fileURLToPath(new URL(`../protocol/wire${extension}`, import.meta.url));
