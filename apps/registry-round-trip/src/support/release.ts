// A release of the working tree, done the way the project releases, in a copy: a changeset for
// every published package (so the copy versions even when no changeset is pending), `changeset
// version`, then `pnpm publish -r` to the local registry, which turns `workspace:` ranges into
// the versions just made.
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { cp, readdir, readFile, writeFile } from 'node:fs/promises';
import { basename, join } from 'node:path';
import { promisify } from 'node:util';
import type { LocalRegistry } from './registry.ts';

const execute = promisify(execFile);

/** Runs a command; on failure the error carries its output. */
export async function run(
  command: string,
  args: readonly string[],
  options: { cwd: string; env?: NodeJS.ProcessEnv; timeout?: number },
): Promise<{ stdout: string; stderr: string }> {
  try {
    return await execute(command, args, {
      cwd: options.cwd,
      env: options.env ?? process.env,
      timeout: options.timeout ?? 120_000,
      maxBuffer: 64 * 1024 * 1024,
    });
  } catch (error) {
    const { stdout = '', stderr = '' } = error as { stdout?: string; stderr?: string };
    throw new Error(`${command} ${args.join(' ')} failed in ${options.cwd}:\n${stdout}\n${stderr}`);
  }
}

/** A package of the repository that is published (not `private`). */
export interface PublishedPackage {
  readonly name: string;
  readonly dir: string;
}

export async function publishedPackages(root: string): Promise<PublishedPackage[]> {
  const found: PublishedPackage[] = [];
  for (const entry of (await readdir(join(root, 'packages'))).sort()) {
    const dir = join(root, 'packages', entry);
    const manifest = JSON.parse(await readFile(join(dir, 'package.json'), 'utf8')) as {
      name: string;
      private?: boolean;
    };
    if (manifest.private !== true) found.push({ name: manifest.name, dir });
  }
  return found;
}

/** What a checkout holds that a release does not read. */
const notCopied = new Set(['node_modules', '.git', '.turbo', 'api-docs', 'coverage']);

/** Copies the working tree (built `dist/` included) to `destination`. */
export async function copyRepository(root: string, destination: string): Promise<void> {
  for (const { dir, name } of await publishedPackages(root)) {
    if (!existsSync(join(dir, 'dist'))) throw new Error(`${name} is not built: run pnpm build`);
  }
  await cp(root, destination, {
    recursive: true,
    filter: (source) => !notCopied.has(basename(source)),
  });
}

/**
 * Versions the copy at `copy` with changesets and publishes every package to `registry`; returns
 * each package's new version.
 */
export async function releaseCopy(
  root: string,
  copy: string,
  registry: LocalRegistry,
): Promise<Map<string, string>> {
  const packages = await publishedPackages(copy);
  const bumps = packages.map(({ name }) => `"${name}": patch`).join('\n');
  await writeFile(
    join(copy, '.changeset', 'registry-round-trip.md'),
    `---\n${bumps}\n---\n\nA release made by the registry round-trip test.\n`,
  );
  // pnpm publish reads the versions of workspace dependencies through the workspace links; make
  // them from the store the checkout was installed from, without the network.
  const { stdout: store } = await run('pnpm', ['store', 'path'], { cwd: root });
  await run(
    'pnpm',
    [
      'install',
      '--offline',
      '--frozen-lockfile',
      '--ignore-scripts',
      '--store-dir',
      store.trim(),
      '--filter',
      '.',
      '--filter',
      './packages/*',
      '--reporter=silent',
    ],
    { cwd: copy },
  );
  await run('pnpm', ['exec', 'changeset', 'version'], { cwd: copy });
  await writeFile(join(copy, '.npmrc'), `${registry.authLine}\n`);
  await run('pnpm', ['publish', '-r', '--registry', registry.url, '--no-git-checks'], {
    cwd: copy,
  });
  const versions = new Map<string, string>();
  for (const { name, dir } of packages) {
    const manifest = JSON.parse(await readFile(join(dir, 'package.json'), 'utf8')) as {
      version: string;
    };
    versions.set(name, manifest.version);
  }
  return versions;
}
