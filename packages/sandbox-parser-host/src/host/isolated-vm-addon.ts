// Finds isolated-vm's compiled addon for `processModel: 'isolate'`, only when that model is
// chosen: isolated-vm is an optional peer dependency. The host never loads it (a V8 or
// isolated-vm failure stays in the child); it resolves the package from here, as the installed
// package would, and asks isolated-vm's own loader (node-gyp-build) which `.node` file fits this
// Node, so that the child reads that one file and resolves no package under its confinement.
import { realpathSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname } from 'node:path';
import { SandboxValidationError } from '@coda/sandbox-core';
import type { IsolateServerFiles } from '../spawn/node-command.ts';

function refuse(message: string): never {
  throw new SandboxValidationError(`Invalid parser host options: processModel: ${message}`, {
    issues: [{ path: 'processModel', message, received: '"isolate"' }],
  });
}

/** The addon the isolate child loads; throws a `SandboxValidationError` when it is not there. */
export function findIsolatedVmAddon(): IsolateServerFiles {
  let entry: string;
  try {
    entry = createRequire(import.meta.url).resolve('isolated-vm');
  } catch {
    refuse(
      "processModel 'isolate' needs the optional peer dependency isolated-vm (^7), which is not installed: add it to your dependencies (npm install isolated-vm)",
    );
  }
  try {
    const nodeGypBuild = createRequire(entry)('node-gyp-build') as { path(dir: string): string };
    return { addonPath: realpathSync(nodeGypBuild.path(dirname(entry))) };
  } catch (error) {
    const why = error instanceof Error ? error.message : String(error);
    return refuse(`isolated-vm is installed but has no addon built for this Node: ${why}`);
  }
}
