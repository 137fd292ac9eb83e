// The packages as a new user gets them: versioned with changesets and published with pnpm to a
// real registry (Verdaccio on loopback), then each installed by name, alone, into an empty
// project with plain npm, after which every runnable ts/js block of its README runs as written
// with plain node. The root README's package table must list exactly what was published. Nothing is copied into
// node_modules: what the examples import is what the registry served.
import { readdirSync, readFileSync } from 'node:fs';
import { chmod, mkdir, mkdtemp, readFile, realpath, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type RedisProcess,
  startRedis,
} from '../../../packages/sandbox-limits-redis/test/redis-servers.ts';
import { expectedOutput } from './expected-output.ts';
import { importedPackages, readReadme } from './support/readme-examples.ts';
import { type LocalRegistry, startRegistry } from './support/registry.ts';
import { copyRepository, releaseCopy } from './support/release.ts';
import { createUserProject, type UserProject, userEnvironment } from './support/user-project.ts';

const root = resolve(import.meta.dirname, '../../..');

/** The published packages, read when the file is collected so each gets its own test. */
const packageNames = readdirSync(join(root, 'packages'))
  .sort()
  .map(
    (entry) =>
      JSON.parse(readFileSync(join(root, 'packages', entry, 'package.json'), 'utf8')) as {
        name: string;
        private?: boolean;
      },
  )
  .filter((manifest) => manifest.private !== true)
  .map((manifest) => manifest.name);

interface RegistryMetadata {
  versions: Record<string, { dependencies?: Record<string, string> }>;
  'dist-tags': { latest: string };
}

let work: string;
let copy: string;
let registry: LocalRegistry | undefined;
let redis: RedisProcess | undefined;
let versions: Map<string, string>;
let env: NodeJS.ProcessEnv;

beforeAll(async () => {
  work = await mkdtemp(join(tmpdir(), 'coda-round-trip-'));
  await chmod(work, 0o755); // the user projects below must be readable by uid 65534
  copy = join(work, 'repository');
  await mkdir(join(work, 'registry'));
  await mkdir(join(work, 'projects'));
  [registry, redis] = await Promise.all([startRegistry(join(work, 'registry')), startRedis()]);
  await copyRepository(root, copy);
  versions = await releaseCopy(root, copy, registry);
  env = userEnvironment({ REDIS_URL: `redis://127.0.0.1:${redis.port}` });
});

afterAll(async () => {
  await Promise.all([registry?.stop(), redis?.stop()]);
  if (work !== undefined) await rm(work, { recursive: true, force: true });
});

/**
 * Installs what `readme` says, saves its files and runs each runnable block in turn; each must
 * exit 0, write nothing to stderr and print what `expectedOutput[label]` says.
 */
async function followReadme(label: string, readme: string, project: UserProject): Promise<void> {
  const { install, runnable, files } = readReadme(readme);
  const expected = expectedOutput[label];
  expect(
    expected?.length,
    `every runnable block of ${label} has its output in src/expected-output.ts`,
  ).toBe(runnable.length);
  if (runnable.length === 0) return;
  expect(install, 'a README with examples says what to npm install').toBeDefined();
  await project.install(install ?? []);
  for (const block of [...runnable, ...files]) {
    const missing = importedPackages(block.code).filter((name) => !install?.includes(name));
    expect(missing, `line ${block.line} imports packages its install line leaves out`).toEqual([]);
  }
  for (const file of files) await project.save(file.name, file.code);
  for (const [index, block] of runnable.entries()) {
    const file = `readme-example-${index + 1}.${block.language}`;
    await project.save(file, block.code);
    const { stdout, stderr } = await project.node(file).catch((error: Error) => {
      throw new Error(`the example at line ${block.line} failed: ${error.message}`);
    });
    expect(stderr, `the example at line ${block.line} wrote to stderr`).toBe('');
    for (const pattern of expected?.[index] ?? []) {
      expect(stdout, `the example at line ${block.line} prints`).toMatch(pattern);
    }
  }
  // A reader pastes the TypeScript blocks into a strict project: they type-check against the
  // published declarations too.
  if (runnable.some((block) => block.language === 'ts')) await project.typecheck();
}

describe('a release published to a local registry', () => {
  it.each(packageNames)('%s installs alone by name and its README examples run', async (name) => {
    const url = registry?.url ?? '';
    const metadata = (await (
      await fetch(new URL(name.replace('/', '%2f'), url))
    ).json()) as RegistryMetadata;
    const version = versions.get(name) ?? '';
    expect(metadata['dist-tags'].latest).toBe(version);
    const dependencies = metadata.versions[version]?.dependencies ?? {};
    for (const [dependency, range] of Object.entries(dependencies)) {
      if (dependency.startsWith('@coda/')) expect(range).toBe(`^${versions.get(dependency)}`);
    }

    const project = await createUserProject(
      join(work, 'projects'),
      url,
      join(work, 'npm-cache'),
      env,
    );
    await project.install([name]);
    const installedDir = join(project.dir, 'node_modules', name);
    const installed = JSON.parse(await readFile(join(installedDir, 'package.json'), 'utf8')) as {
      version: string;
      license: string;
      exports: Record<string, unknown>;
      bin?: Record<string, string>;
    };
    expect(installed.version).toBe(version);
    expect(installed.license).toBe('MIT');
    expect(await readFile(join(installedDir, 'LICENSE'), 'utf8')).toMatch(/^MIT License\n/);
    expect(await readFile(join(installedDir, 'CHANGELOG.md'), 'utf8')).toContain(`## ${version}\n`);

    // Each command is linked where npm puts commands.
    for (const [command, file] of Object.entries(installed.bin ?? {})) {
      expect(await realpath(join(project.dir, 'node_modules', '.bin', command))).toBe(
        await realpath(join(installedDir, file)),
      );
    }

    // Every entry imports without side effects: nothing printed, the process not ended.
    for (const subpath of Object.keys(installed.exports)) {
      if (subpath === './package.json') continue;
      const specifier = `${name}${subpath.slice(1)}`;
      await project.save(
        'import-entry.mjs',
        `await import('${specifier}');\nconsole.log('imported');\n`,
      );
      expect(await project.node('import-entry.mjs'), specifier).toEqual({
        stdout: 'imported\n',
        stderr: '',
      });
    }

    // The README as published: the one in the tarball.
    const readme = await readFile(join(installedDir, 'README.md'), 'utf8');
    expect(readReadme(readme).install?.[0], 'the install line names the package first').toBe(name);
    expect(readReadme(readme).runnable.length, 'a package README has an example').toBeGreaterThan(
      0,
    );
    await followReadme(name, readme, project);
  });

  it("the root README's package table lists exactly the packages this release published", async () => {
    // The root README holds shell commands only (nothing to run here); what a reader acts on is
    // its table of packages: every published package is in it, linked to its own directory.
    const readme = await readFile(join(copy, 'README.md'), 'utf8');
    const rows = [...readme.matchAll(/^\| \[`(@coda\/[a-z-]+)`\]\((packages\/[a-z-]+)\) \|/gm)];
    expect(rows.map(([, name]) => name).sort()).toEqual([...versions.keys()].sort());
    for (const [, name, directory] of rows) {
      const manifest = JSON.parse(
        await readFile(join(copy, directory ?? '', 'package.json'), 'utf8'),
      ) as { name: string };
      expect(manifest.name, `${directory} holds ${name}`).toBe(name);
    }
  });
});
