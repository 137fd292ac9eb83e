// Node's loader reads the nearest package.json above every module it loads (its "package scope":
// module type, imports map). bubblewrap's view simply lacks the files it does not bind (ENOENT,
// which the loader skips); under Landlock they exist and are refused (EACCES, which the loader
// does not skip). So the child is also given read access to those few package.json files.
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';

/** The nearest existing package.json in or above each directory (deduplicated). */
export function packageScopes(directories: readonly string[]): string[] {
  const scopes = new Set<string>();
  for (const start of directories) {
    for (let dir = start; ; dir = dirname(dir)) {
      const manifest = join(dir, 'package.json');
      if (existsSync(manifest)) {
        scopes.add(manifest);
        break;
      }
      if (dir === '/') break;
    }
  }
  return [...scopes];
}
